"""The observation pipeline of a group of named observation terms, configured in the task file
(`task.env.observations.<group>`), in the manner of Isaac Lab's observation manager:

    observations:
      policy:
        history: 3                     # stack the last 3 frames of the group (oldest first)
        base_lin_vel: {scale: 2.0, noise: {type: uniform, scale: 0.2}}
        base_ang_vel: {scale: 0.25, noise: {type: gaussian, std: 0.05}, clip: [-10.0, 10.0], delay: 1}

Each term's value goes through, in this order (legged_gym's: the noise is in the scaled units)

    scale:  a number, or one number per component (default 1)
    noise:  {type: uniform, scale: a}: + a * U(-1, 1); {type: gaussian, std: s}: + s * N(0, 1);
            null: none. Both amplitudes are multiplied by the env's `obs_noise` (a global factor)
    clip:   [lo, hi] (default none)
    delay:  n policy steps: the term reads the (scaled, noisy, clipped) value of n steps ago;
            zero before the n-th step of an episode (default 0)

and the group's frame (the terms concatenated in the env's order) is stacked over the last
`history` policy steps (default 1: the frame alone): [num_envs, history * frame size], the
oldest frame first and the current one last (Isaac Lab's order); frames from before the
episode's start are zero.

Random draws: one uniform [num_envs, frame size] draw from the env's generator per call
(`BatchedEnv.rand`), whatever is configured, so the draws of every other consumer stay where
they are; a gaussian term turns its columns of that draw into normal deviates by the inverse
CDF, sqrt(2) erfinv(2u - 1) with u moved to the middle of its 2^-24 cell (so |N| <= 5.3).

The past frames are the env's per-world tensor `observation_history[group]` [num_envs, L,
frame size] (L = history - 1 + the largest delay; absent when L = 0), saved in its state_dict
and zeroed for the worlds that reset. Computing observations does not change it: the env calls
`commit()` once per policy step (after `step` and `reset`) with the frame it returned.
"""

from __future__ import annotations

import math

import torch

NOISE_TYPES = {"uniform": "scale", "gaussian": "std"}  # type -> its amplitude key
TERM_KEYS = ("scale", "noise", "clip", "delay")
GROUP_KEYS = ("history",)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_count(v, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def _term_errors(where: str, term, size: int | None) -> list[str]:
    if term is None:
        return []
    if not isinstance(term, dict):
        return [f"{where}: a mapping with keys {', '.join(TERM_KEYS)}, got {term!r}"]
    errors = []
    unknown = sorted(set(term) - set(TERM_KEYS))
    if unknown:
        errors.append(f"{where}: unknown keys {unknown}; accepted: {', '.join(TERM_KEYS)}")
    scale = term.get("scale", 1.0)
    if not (_is_number(scale) or isinstance(scale, (list, tuple)) and all(map(_is_number, scale))
            and (size is None or len(scale) == size)):
        errors.append(f"{where}.scale: a number or a list of {size or 'per-component'} numbers, got {scale!r}")
    noise = term.get("noise")
    if noise is not None:
        kind = noise.get("type") if isinstance(noise, dict) else None
        if kind not in NOISE_TYPES:
            errors.append(f"{where}.noise: a mapping with type: one of {', '.join(NOISE_TYPES)}, got {noise!r}")
        else:
            key = NOISE_TYPES[kind]
            extra = sorted(set(noise) - {"type", key})
            if extra:
                errors.append(f"{where}.noise: unknown keys {extra} for {kind} noise (accepted: type, {key})")
            if not (_is_number(noise.get(key)) and noise[key] >= 0):
                errors.append(f"{where}.noise.{key}: a number >= 0 ({kind} noise), got {noise.get(key)!r}")
    clip = term.get("clip")
    if clip is not None and not (isinstance(clip, (list, tuple)) and len(clip) == 2 and all(map(_is_number, clip))
                                 and clip[0] < clip[1]):
        errors.append(f"{where}.clip: [lo, hi] with lo < hi, or null, got {clip!r}")
    if not _is_count(term.get("delay", 0), 0):
        errors.append(f"{where}.delay: an integer >= 0 (policy steps), got {term.get('delay')!r}")
    return errors


def check_config(cfg, groups: dict[str, list[str]]) -> list[str]:
    """Problems of an observations mapping (`task.env.observations`) for an env whose configurable
    groups have the terms `groups` ({group: [term names]}); empty when it is valid."""
    if cfg is None:
        return []
    if not isinstance(cfg, dict):
        return [f"task.env.observations must be a mapping {{group: {{term: ...}}}}, got {cfg!r}"]
    errors = []
    for group, group_cfg in cfg.items():
        where = f"task.env.observations.{group}"
        if group not in groups:
            errors.append(f"{where}: no configurable observation group {group!r}; configurable: "
                          f"{', '.join(groups) or 'none'} (the critic's observations are privileged and clean)")
            continue
        if group_cfg is None:
            continue
        if not isinstance(group_cfg, dict):
            errors.append(f"{where}: a mapping of terms and history, got {group_cfg!r}")
            continue
        for name, term in group_cfg.items():
            if name == "history":
                if not _is_count(term, 1):
                    errors.append(f"{where}.history: an integer >= 1 (frames), got {term!r}")
            elif name not in groups[group]:
                errors.append(f"{where}: unknown observation term {name!r}; the {group} group's terms: "
                              f"{', '.join(groups[group])} (and history)")
            else:
                errors.extend(_term_errors(f"{where}.{name}", term, None))
    return errors


def merge(defaults: dict, cfg: dict | None) -> dict:
    """The group configuration: each term's keys in `cfg` replace those of `defaults` (a term set
    to null is passed through unprocessed: scale 1, no noise, no clip, no delay)."""
    out = {name: dict(term) for name, term in defaults.items()}
    for name, term in (cfg or {}).items():
        if name == "history":
            out[name] = term
        elif term is None:
            out[name] = {}
        else:
            out[name] = {**out.get(name, {}), **term}
    return out


class ObservationPipeline:
    """The pipeline of one observation group (see the module docstring).

    Args:
        env: the env (its generator, num_envs, device; it holds `observation_history`).
        group: the group's name ("policy").
        sizes: {term name: number of components}, in the order of the frame.
        cfg: the merged group configuration (`merge`), validated here.
        noise_multiplier: the env's `obs_noise`, a factor on every noise amplitude.
    """

    def __init__(self, env, group: str, sizes: dict[str, int], cfg: dict, noise_multiplier: float = 1.0):
        errors = check_config({group: cfg}, {group: list(sizes)})
        errors += [e for name, term in cfg.items() if name in sizes
                   for e in _term_errors(f"task.env.observations.{group}.{name}", term, sizes[name])
                   if ".scale:" in e]  # per-component scales need the sizes
        if errors:
            raise ValueError("; ".join(dict.fromkeys(errors)))
        self.env, self.group, self.sizes = env, group, dict(sizes)
        self._cfg = {name: dict(cfg.get(name) or {}) for name in sizes}
        self.history = int(cfg.get("history", 1))
        self.size = sum(sizes.values())
        scale, amplitude, gaussian, delay = [], [], [], []
        low, high = [], []
        for name, n in sizes.items():
            term = cfg.get(name) or {}
            s = term.get("scale", 1.0)
            scale += list(s) if isinstance(s, (list, tuple)) else [s] * n
            noise = term.get("noise")
            kind = noise["type"] if noise else "uniform"
            amplitude += [noise[NOISE_TYPES[kind]] if noise else 0.0] * n
            gaussian += [kind == "gaussian"] * n
            clip = term.get("clip") or (-math.inf, math.inf)
            low += [clip[0]] * n
            high += [clip[1]] * n
            delay += [int(term.get("delay", 0))] * n
        dev = env.device
        self.scale = torch.tensor(scale, dtype=torch.float32, device=dev)
        # in float32 and then times the multiplier, as the hand-written noise always was
        self.amplitude = torch.tensor(amplitude, dtype=torch.float32, device=dev) * noise_multiplier
        self.gaussian = torch.tensor(gaussian, dtype=torch.bool, device=dev)
        self.any_gaussian = any(gaussian)
        self.clip = (torch.tensor(low, dtype=torch.float32, device=dev),
                     torch.tensor(high, dtype=torch.float32, device=dev)) if any(
            math.isfinite(v) for v in low + high) else None
        self.delay = torch.tensor(delay, dtype=torch.long, device=dev)
        self.past = self.history - 1 + max(delay, default=0)  # frames kept besides the current one
        self.buffer = None
        if self.past:
            if not isinstance(getattr(env, "observation_history", None), dict):
                env.observation_history = {}  # a dict of per-world tensors: in the env's state_dict
            self.buffer = torch.zeros(env.num_envs, self.past, self.size, device=dev)
            env.observation_history[group] = self.buffer
            # index [history, size] into (current, past...) frames: slot h (h steps ago) of column c
            # reads the frame h + delay[c] steps ago
            steps = torch.arange(self.history, device=dev)[:, None] + self.delay[None, :]
            self._index = steps.flip(0)  # oldest first
        self._frame = None  # the last frame computed, in a tuple (a cache, not state)

    def terms(self) -> list[dict]:
        """The group's frame as a deployment reads it: one entry per term, in frame order, with
        its `name`, `size`, `scale` (one number per component: observation = raw value x scale),
        `clip` ([lo, hi] after scaling, or None) and `delay` (policy steps). The noise is training's
        only and is left out."""
        out, start = [], 0
        for name, n in self.sizes.items():
            clip = self._cfg[name].get("clip")
            scale = [float(str(v)) for v in self.scale[start:start + n].cpu().numpy()]  # float32's shortest decimals
            out.append({"name": name, "size": int(n), "scale": scale,
                        "clip": [float(clip[0]), float(clip[1])] if clip else None,
                        "delay": int(self._cfg[name].get("delay", 0))})
            start += n
        return out

    @property
    def num_obs(self) -> int:
        """Size of the group's observation: history x frame size."""
        return self.history * self.size

    def __call__(self, values: list[torch.Tensor]) -> torch.Tensor:
        """The group's observation [num_envs, num_obs] from the terms' raw values (each [num_envs,
        size], in the order of `sizes`). Draws the noise; does not change the history."""
        frame = torch.cat(values, dim=1) * self.scale
        u = self.env.rand(*frame.shape)
        unit = u * 2 - 1
        if self.any_gaussian:
            z = math.sqrt(2.0) * torch.erfinv(2.0 * (u.double() + 2.0 ** -25) - 1.0)
            unit = torch.where(self.gaussian, z.to(unit.dtype), unit)
        frame = frame + unit * self.amplitude
        if self.clip is not None:
            frame = torch.clamp(frame, self.clip[0], self.clip[1])
        self._frame = (frame,)
        if self.buffer is None:
            return frame
        frames = torch.cat([frame[:, None], self.buffer], dim=1)  # [num_envs, 1 + past, size], newest first
        index = self._index[None].expand(frame.shape[0], -1, -1)
        return frames.gather(1, index).reshape(frame.shape[0], self.num_obs)

    def commit(self) -> None:
        """Push the last computed frame into the history (once per policy step)."""
        if self.buffer is not None and self._frame is not None:
            self.buffer.copy_(torch.cat([self._frame[0][:, None], self.buffer[:, :-1]], dim=1))
        self._frame = None

    def reset(self, env_ids: torch.Tensor) -> None:
        """Forget the past frames of the worlds env_ids (zeros)."""
        if self.buffer is not None:
            self.buffer[env_ids] = 0.0
