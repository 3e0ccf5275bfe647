"""The engine: data sets, splits, models, the trial runner, executors, the result store and the replay planner."""
