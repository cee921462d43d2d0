"""Dispatch: the plan (weights, per-shape decisions), the cost model and its constants,
calibrate, tune, explain, the guards that refuse a call before it allocates, and the workspace.
Chooses among ``convt._backends.BACKENDS``; never imports a front end."""
