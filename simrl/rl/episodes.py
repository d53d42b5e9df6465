"""Episode statistics kept on the device, for learners whose rollout never waits for the host."""

import torch


class EpisodeRing:
    """The returns and lengths of the last `capacity` finished episodes, on the device.

    `add` takes the worlds that finished this step as a mask, with no host synchronisation (a
    GPU step never waits for the host); `means` synchronises once, when a progress line is
    printed. Of the episodes one step finishes, the last `capacity` in world order are kept, each
    in a slot of its own; the others write a sink slot that is never read."""

    def __init__(self, capacity: int, device):
        self.capacity = capacity
        self.returns = torch.zeros(capacity + 1, device=device)
        self.lengths = torch.zeros(capacity + 1, device=device)
        self.count = torch.zeros((), dtype=torch.long, device=device)

    def slots(self, done: torch.Tensor) -> torch.Tensor:
        """Where each world's episode goes: a slot of its own for the kept ones (so that the
        scatter's result does not depend on the order of its writes, on a GPU), else the sink."""
        order = torch.cumsum(done.long(), 0)  # 1-based rank among this step's finished worlds
        keep = done & (order > order[-1] - self.capacity)
        return torch.where(keep, (self.count + order - 1) % self.capacity, self.capacity)

    def add(self, done: torch.Tensor, returns: torch.Tensor, lengths: torch.Tensor) -> None:
        slot = self.slots(done)
        self.returns.scatter_(0, slot, returns.to(self.returns.dtype))
        self.lengths.scatter_(0, slot, lengths.to(self.lengths.dtype))
        self.count += done.long().sum()

    def _valid(self) -> int:
        return int(torch.clamp(self.count, max=self.capacity))

    def means(self) -> tuple[float, float]:
        """Mean return and length of the kept episodes (nan before the first one ends)."""
        n = self._valid()
        if n == 0:
            return float("nan"), float("nan")
        return float(self.returns[:n].double().mean()), float(self.lengths[:n].double().mean())

    def episodes(self) -> tuple[list[float], list[float]]:
        n = self._valid()
        return self.returns[:n].tolist(), self.lengths[:n].tolist()

    def restore(self, returns: list[float], lengths: list[float]) -> None:
        returns, lengths = list(returns)[-self.capacity:], list(lengths)[-self.capacity:]
        n = len(returns)
        self.returns[:n] = torch.as_tensor(returns, dtype=self.returns.dtype)
        self.lengths[:n] = torch.as_tensor(lengths, dtype=self.lengths.dtype)
        self.count.fill_(n)
