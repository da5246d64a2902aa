"""The sandbox uid pool (environments/uids.py): exclusive leases across threads and processes."""
import os
import subprocess
import sys
import threading

import pytest

from environments import uids

# A range of its own, so these tests never contend with sandboxes of other tests.
FIRST = 1_991_000


def test_leases_are_distinct_and_reusable(tmp_path):
    pool = uids.UidPool(FIRST, 3, lock_dir=str(tmp_path / "locks"))
    leases = [pool.acquire() for _ in range(3)]
    assert sorted(lease.uid for lease in leases) == [FIRST, FIRST + 1, FIRST + 2]
    with pytest.raises(uids.UidPoolExhausted, match="all 3 sandbox uids"):
        pool.acquire()
    leases[1].release()
    leases[1].release()  # twice is fine
    again = pool.acquire()
    assert again.uid == FIRST + 1
    for lease in leases + [again]:
        lease.release()


def test_threads_never_share_a_uid(tmp_path):
    pool = uids.UidPool(FIRST, 16, lock_dir=str(tmp_path / "locks"))
    got, barrier = [], threading.Barrier(8)

    def take():
        barrier.wait()
        got.append(pool.acquire())

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({lease.uid for lease in got}) == 8
    for lease in got:
        lease.release()


def test_another_process_holds_its_uid_until_it_exits(tmp_path):
    lock_dir = str(tmp_path / "locks")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from environments import uids; "
         f"lease = uids.UidPool({FIRST}, 2, lock_dir={lock_dir!r}).acquire(); "
         "print(lease.uid, flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    held = int(holder.stdout.readline())
    pool = uids.UidPool(FIRST, 2, lock_dir=lock_dir)
    mine = pool.acquire()
    assert mine.uid != held
    with pytest.raises(uids.UidPoolExhausted):
        pool.acquire()
    holder.communicate("")  # the holder exits without releasing: the kernel drops its lock
    assert pool.acquire().uid == held
    mine.release()


def test_release_kills_processes_left_running_as_the_uid(tmp_path):
    lease = uids.UidPool(FIRST, 1, lock_dir=str(tmp_path / "locks")).acquire()
    proc = subprocess.Popen(["setpriv", f"--reuid={lease.uid}", f"--regid={lease.uid}",
                             "--clear-groups", "sh", "-c", "echo started; exec sleep 600"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "started\n"  # now running as the leased uid
        assert uids.processes_of_uid(lease.uid) == [proc.pid]
        lease.release()
        assert proc.wait(timeout=10) == -9
        assert uids.processes_of_uid(lease.uid) == []
    finally:
        proc.kill()


def test_refuses_to_kill_root_or_ourselves():
    with pytest.raises(ValueError, match="not a sandbox uid"):
        uids.kill_processes_of_uid(0)
    with pytest.raises(ValueError, match="not a sandbox uid"):
        uids.kill_processes_of_uid(os.geteuid())


def test_rejects_an_unsafe_lock_directory(tmp_path):
    unsafe = tmp_path / "shared"
    unsafe.mkdir()
    os.chmod(unsafe, 0o777)
    with pytest.raises(PermissionError, match="not writable by others"):
        uids.UidPool(FIRST, 1, lock_dir=str(unsafe)).acquire()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(OSError):
        uids.UidPool(FIRST, 1, lock_dir=str(link)).acquire()


def test_pool_range_must_be_above_system_uids():
    with pytest.raises(ValueError, match="first_uid >= 1000"):
        uids.UidPool(0, 4)
