"""Seraph's defaults that light modules (the request, the CLI's help) and the profiler share."""

#: The tuner trains with env slots of this many steps (``PPOConfig.steps_per_env``): with
#: slots, every function count trains the same policy at a batch (``serverless.slots.slot_plan``),
#: so the function count is a pure systems knob, as the search treats it. 128 is CleanRL's
#: PPO segment length per env (``num_steps``). 0 turns slots off (one env per function).
DEFAULT_STEPS_PER_ENV = 128
