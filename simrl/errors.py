"""Errors raised by simrl."""


class UnsupportedFeatureError(ValueError):
    """The model uses a feature that changes the dynamics and that simrl does not implement.

    The message names the MJCF element and attribute, and says how to avoid it where there is
    a way (for instance a disable flag in ``<option>``).
    """


class MJCFError(ValueError):
    """MuJoCo's compiler rejected the MJCF; the message includes MuJoCo's own text."""
