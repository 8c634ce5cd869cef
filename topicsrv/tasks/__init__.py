"""Background work on top of the engine and storage, shared by both fronts."""
