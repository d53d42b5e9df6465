"""The terms environments are composed of, as mjlab's and Isaac Lab's `mdp` modules: small
named functions (or classes, when a term resolves names once) of the env, with their parameters
from the task file (envs/terms.py says how a task file lists them).

    rewards.py       reward terms of the legged tasks (legged_gym, Isaac Lab, mjlab, unitree_rl_gym)
    terminations.py  their failure conditions
    commands.py      the velocity command and its heading controller
    curriculum.py    the terrain and command curricula of the rough-terrain tasks
    events.py        domain randomization terms (envs.randomization runs them)
    observations.py  observation terms of the legged tasks (envs.observations is their pipeline)
    cartpole.py      the cart-pole tasks' rewards and terminations
    ant.py           gymnasium Ant-v5's rewards and termination
"""
