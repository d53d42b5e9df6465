"""Domain randomization as configured terms, in the manner of Isaac Lab's / mjlab's event manager.

A task lists its terms under `task.env.randomization`, one mapping per term, keyed by a name of
the user's choice (`type:` says which kind of term it is; without it the name is the type):

    randomization:
      friction: {mode: reset, range: [0.5, 1.25], operation: abs, shared: true}
      trunk_mass: {type: body_mass, mode: startup, bodies: [trunk], operation: add, range: [-1.0, 2.0]}
      push: {mode: interval, interval_s: 8.0, range: [-0.5, 0.5]}

The terms themselves (their keys: mode, range, operation, distribution, shared, and each
type's own; the fields each changes) are the classes of envs/mdp/events.py, by type in
`TERM_TYPES`; this module checks a task's mapping (`check_config`) and runs its terms
(`Randomization`).
"""

from __future__ import annotations

import torch

from envs.mdp.events import COMMON_KEYS, MODES, TERM_TYPES, EncoderBias, PushVelocity, Term

__all__ = ["TERM_TYPES", "Randomization", "check_config"]


def check_config(cfg) -> list[str]:
    """Problems of a randomization mapping found without a model (for tasks.config)."""
    if cfg is None:
        return []
    if not isinstance(cfg, dict):
        return [f"task.env.randomization must be a mapping of terms, got {cfg!r}"]
    errors = []
    for name, term in cfg.items():
        if term is None:
            continue  # a term switched off by an override (task.env.randomization.push=null)
        if not isinstance(term, dict):
            errors.append(f"task.env.randomization.{name}: a mapping (mode, range, ...), got {term!r}")
            continue
        kind = term.get("type", name)
        if kind not in TERM_TYPES:
            errors.append(f"task.env.randomization.{name}: unknown term type {kind!r} (set type: to one of "
                          f"{', '.join(TERM_TYPES)})")
            continue
        unknown = set(term) - COMMON_KEYS - TERM_TYPES[kind].extra_keys
        if unknown:
            errors.append(f"task.env.randomization.{name}: unknown keys {sorted(unknown)} for a {kind} term")
        if term.get("mode", "reset") not in MODES:
            errors.append(f"task.env.randomization.{name}.mode: one of {', '.join(MODES)}, got {term.get('mode')!r}")
    return errors


class Randomization:
    """The configured terms of an env (`BatchedEnv.setup_randomization` builds it): `startup`
    applies the startup terms to every world (at construction), `reset(env_ids)` the reset terms
    (and restarts the interval timers), `interval()` fires the interval terms whose timer ran out
    (once per policy step). Timers are the env's per-world tensors (saved in its state_dict)."""

    def __init__(self, env, cfg: dict | None):
        errors = check_config(cfg)
        if errors:
            raise ValueError("; ".join(errors))
        self.env = env
        self.terms: list[Term] = []
        for name, term_cfg in (cfg or {}).items():
            if term_cfg is None:
                continue
            kind = term_cfg.get("type", name)
            self.terms.append(TERM_TYPES[kind](env, name, dict(term_cfg)))
        self._check_overlaps()
        every = torch.arange(env.num_envs, device=env.device)
        self.timers = {t.name: self._draw_interval(t, every) for t in self.terms if t.mode == "interval"}
        if self.timers:
            env.randomization_timers = self.timers  # a dict of per-world tensors: in the env's state_dict

    def _check_overlaps(self) -> None:
        seen = {}
        for t in self.terms:
            elements = getattr(t, "elements", None)
            keys = [(f, None) for f in t.fields] if elements is None else \
                [(f, int(e)) for f in t.fields for e in elements.tolist()]
            if isinstance(t, (PushVelocity, EncoderBias)):
                continue  # additive on state or separate offsets: terms compose
            for key in keys:
                if key in seen and seen[key] != t.name:
                    raise ValueError(f"randomization terms {seen[key]!r} and {t.name!r} both set {key[0]}"
                                     f"{'' if key[1] is None else f' of element {key[1]}'}; each value is computed "
                                     f"from the nominal one, so one would overwrite the other: select disjoint "
                                     f"bodies / joints / actuators")
                seen[key] = t.name

    def describe(self) -> list[str]:
        return [t.describe() for t in self.terms]

    def _run(self, terms, env_ids: torch.Tensor) -> None:
        if env_ids.numel() == 0 or not terms:
            return
        for t in terms:
            t.apply(env_ids)
        if any(t.set_const for t in terms):
            self.env.sim.set_const(env_ids)

    def startup(self) -> None:
        self._run([t for t in self.terms if t.mode == "startup"], torch.arange(self.env.num_envs,
                                                                               device=self.env.device))

    def reset(self, env_ids: torch.Tensor) -> None:
        self._run([t for t in self.terms if t.mode == "reset"], env_ids)
        for t in self.terms:
            if t.mode == "interval":
                self.timers[t.name][env_ids] = self._draw_interval(t, env_ids)

    def _draw_interval(self, t: Term, env_ids: torch.Tensor) -> torch.Tensor:
        lo, hi = t.interval
        if lo == hi:
            return torch.full((env_ids.numel(),), lo, dtype=torch.long, device=self.env.device)
        u = self.env.rand_worlds(env_ids, 1)[:, 0]
        return lo + torch.floor(u * (hi - lo + 1)).long().clamp_max(hi - lo)

    def interval(self) -> None:
        """One policy step: count the timers down, fire the terms that reached zero."""
        for t in self.terms:
            if t.mode != "interval":
                continue
            timer = self.timers[t.name]
            timer -= 1
            if self.env.sync_free:  # every world runs the term, those due keep the result
                only = None if t.writes is None else (*t.writes, "world_draws", f"randomization.timers.{t.name}")
                with self.env._rows_only(timer <= 0, only=only) as every:
                    self._run([t], every)
                    timer.copy_(self._draw_interval(t, every))
                continue
            due = (timer <= 0).nonzero(as_tuple=False).squeeze(-1)
            if due.numel():
                self._run([t], due)
                timer[due] = self._draw_interval(t, due)

    def sync_free_problems(self) -> list[str]:
        """The terms that need the host when they run after startup: those whose fields MuJoCo's
        mj_setConst derives from (simrl.Sim.set_const runs it on a host copy)."""
        return [f"randomization term {t.name!r} (mode {t.mode}) changes fields that Sim.set_const derives "
                f"from on the host; use mode startup for it" for t in self.terms if t.set_const and t.mode != "startup"]

