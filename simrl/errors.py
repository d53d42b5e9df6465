"""Errors raised by simrl."""


class UnsupportedFeatureError(ValueError):
    """The model uses a feature that changes the dynamics and that simrl does not implement.

    The message names the MJCF element and attribute, and says how to avoid it where there is
    a way (for instance a disable flag in ``<option>``).
    """


class MJCFError(ValueError):
    """MuJoCo's compiler rejected the MJCF; the message includes MuJoCo's own text."""


class ConfigError(ValueError):
    """A training or evaluation configuration is invalid; the message names each offending key
    (`num_envs`, `task.env.decimation`, ...), the value given and what is expected."""


class CheckpointError(ValueError):
    """A checkpoint cannot be used: the file is missing, corrupt or truncated, holds objects that
    loading safely refuses, or was written for another task or other observation/action sizes.
    The message names the file."""
