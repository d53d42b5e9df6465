"""Batched environments on top of `simrl.Sim`, and the robot MJCF assets they use.

    import envs
    env = envs.make("cartpole", num_envs=256, device="cpu")
    obs = env.reset()                      # {"policy": [256, 5], "critic": [256, 5]}
    obs, reward, terminated, time_outs, extras = env.step(actions)
"""

from pathlib import Path

#: Directory of the robot MJCF files shipped with simrl.
ASSETS_DIR = Path(__file__).resolve().parent / "assets"


def registry() -> dict:
    """The environments `make` knows: name -> (environment class, keyword arguments it fixes). A
    task file names its environment with `name:` (tasks/)."""
    from envs.ant import AntEnv
    from envs.cartpole import CartpoleEnv
    from envs.humanoid import HumanoidEnv
    from envs.humanoid_rough import HumanoidRoughEnv
    from envs.quadruped import QuadrupedEnv
    from envs.quadruped_rough import QuadrupedRoughEnv

    return {
        "ant": (AntEnv, {}),
        "humanoid": (HumanoidEnv, {}),
        "humanoid_rough": (HumanoidRoughEnv, {}),
        "quadruped": (QuadrupedEnv, {}),
        "quadruped_rough": (QuadrupedRoughEnv, {}),
        "cartpole": (CartpoleEnv, {"swingup": False}),
        "cartpole_swingup": (CartpoleEnv, {"swingup": True, "episode_length_s": 10.0}),
    }


def names() -> list[str]:
    """Names accepted by `make`."""
    return sorted(registry())


def make(name: str, **kwargs):
    """Create the environment `name` (see `names()`); keyword arguments override its defaults.
    Keywords of the former flat form (`reward_weights`, `tracking_sigma`, ...) are refused
    with what to pass instead (envs/terms.py)."""
    from envs.terms import former_key_error

    known = registry()
    if name not in known:
        raise ValueError(f"unknown environment {name!r}; available: {', '.join(sorted(known))}")
    cls, defaults = known[name]
    former = [e for e in (former_key_error(cls, key, kwargs, prefix="") for key in kwargs) if e]
    if former:
        raise ValueError("; ".join(former))
    env = cls(**{**defaults, **kwargs})
    env.name = name
    return env
