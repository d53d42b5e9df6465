"""The terms environments are composed of, as mjlab's and Isaac Lab's `mdp` modules: small
named functions (or classes) of the env, with their parameters from the task file.

    events.py        domain randomization terms (envs.randomization runs them)
"""
