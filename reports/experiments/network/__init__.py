"""The "network-limit" experiment: a user's trained network against its own time-step limit.
Its keys and files (`inputs`), its run and judge (`experiment`), its verdict and thresholds
(`verdict`), its figures of merit (`merit`) and its section (`render`)."""
