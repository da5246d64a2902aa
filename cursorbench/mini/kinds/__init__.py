"""The task kinds of the mini suite. Each module's `make(ctx, ...)` turns a project into a
`draft.TaskDraft`, or raises `draft.NotApplicable` when the project cannot host it."""
