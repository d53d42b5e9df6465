"""Training on several processes with torch.distributed, launched by `torchrun`.

    torchrun --nproc_per_node=2 scripts/train.py task=quadruped            # 2 GPUs (or 2 CPU ranks)
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d \\
             --rdzv_endpoint=HOST:29400 --rdzv_id=run1 scripts/train.py ...  # 2 machines x 8 GPUs

torchrun starts one process per rank and tells each its place through the environment
(WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Each rank simulates its own
`num_envs` worlds on its own device (cuda:LOCAL_RANK, or the CPU) with its own seed
(seed + RANK); the policy starts equal on every rank (broadcast from rank 0) and every update
averages the gradients of all ranks with `all_reduce`, so the ranks stay identical. The process
group's backend follows the device: NCCL on CUDA, gloo on the CPU. Collectives give up after
`timeout_s`, so a rank that hangs ends the run with an error instead of blocking it forever;
a rank that crashes is seen by torchrun, which stops the others and exits non-zero.

Nothing here is a communication layer of its own: it is PyTorch's process group, used the way
rsl-rl-lib's multi-GPU PPO uses it (its `multi_gpu` configuration), and the same all-reduce of
gradients for SHAC's actor and critic.
"""

import datetime
import os
from dataclasses import dataclass

import torch

from simrl.errors import ConfigError


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands in a torchrun launch (world_size 1 without torchrun)."""

    world_size: int = 1
    rank: int = 0
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def rsl_rl_config(self) -> dict | None:
        """rsl-rl-lib's `multi_gpu` entry of the training configuration (None: one process)."""
        if not self.enabled:
            return None
        return {"global_rank": self.rank, "local_rank": self.local_rank, "world_size": self.world_size}


def from_environment(environ=None) -> DistInfo:
    """The rank layout torchrun put in the environment; one process when WORLD_SIZE is unset or 1.
    Inconsistent values raise ConfigError naming them."""
    env = os.environ if environ is None else environ
    try:
        world_size = int(env.get("WORLD_SIZE", "1"))
        rank = int(env.get("RANK", "0"))
        local_rank = int(env.get("LOCAL_RANK", str(rank)))
    except ValueError as e:
        raise ConfigError(f"torchrun environment: WORLD_SIZE, RANK and LOCAL_RANK must be integers ({e})") from None
    if world_size < 1 or not 0 <= rank < world_size or not 0 <= local_rank < world_size:
        raise ConfigError(f"torchrun environment: RANK={rank}, LOCAL_RANK={local_rank} do not fit "
                          f"WORLD_SIZE={world_size}")
    return DistInfo(world_size, rank, local_rank)


def rank_device(device: str, info: DistInfo) -> str:
    """The device of this rank from the `device` setting (already resolved for one process:
    cpu, or cuda:N). With several ranks, CUDA means cuda:LOCAL_RANK, one GPU per rank; naming
    another GPU explicitly is an error, since two ranks would share it."""
    if not info.enabled or not device.startswith("cuda"):
        return device
    wanted = f"cuda:{info.local_rank}"
    if device not in ("cuda", "cuda:0", wanted):
        raise ConfigError(f"device={device}: under torchrun each rank uses cuda:LOCAL_RANK (this rank: {wanted}); "
                          f"use device=auto or device=cuda")
    if info.local_rank >= torch.cuda.device_count():
        raise ConfigError(f"rank {info.rank} needs {wanted} but this machine has {torch.cuda.device_count()} "
                          f"GPU(s); start at most that many processes per node (--nproc_per_node)")
    return wanted


def init(info: DistInfo, device: str, timeout_s: float) -> None:
    """Join the process group: NCCL when the device is CUDA, gloo on the CPU. Collectives that
    wait longer than `timeout_s` for another rank raise instead of hanging."""
    if not info.enabled or torch.distributed.is_initialized():
        return
    if not torch.distributed.is_available():
        raise ConfigError("torchrun launched several ranks but this PyTorch build has no torch.distributed")
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(device)
    torch.distributed.init_process_group(backend=backend, rank=info.rank, world_size=info.world_size,
                                         timeout=datetime.timedelta(seconds=float(timeout_s)))


def shutdown() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def is_collective_error(error: BaseException) -> bool:
    """Whether `error` is a collective that failed: timed out waiting for a rank, or found a
    rank's connection closed (gloo raises RuntimeError, NCCL DistBackendError)."""
    if isinstance(error, torch.distributed.DistError):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and any(k in text for k in ("gloo", "Gloo", "NCCL", "c10d"))


def world_size() -> int:
    """The number of ranks of the initialised process group (1 without one)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return 1


def rank() -> int:
    """This process's rank in the initialised process group (0 without one)."""
    return torch.distributed.get_rank() if world_size() > 1 else 0


def broadcast_object(obj, src: int = 0):
    """Rank `src`'s `obj` (any picklable value) on every rank."""
    if world_size() == 1:
        return obj
    holder = [obj]
    torch.distributed.broadcast_object_list(holder, src=src)
    return holder[0]


def broadcast_modules(*modules: torch.nn.Module, src: int = 0) -> None:
    """Copy rank `src`'s parameters and buffers (normalisers included) into every rank's modules."""
    if world_size() == 1:
        return
    for module in modules:
        for tensor in module.state_dict().values():
            torch.distributed.broadcast(tensor, src=src)


def average_gradients(parameters) -> None:
    """Replace each gradient by its mean over the ranks: one all-reduce of the flattened
    gradients. A parameter without a gradient on this rank contributes zeros, so every rank
    takes part in the same collective."""
    n = world_size()
    if n == 1:
        return
    params = [p for p in parameters if p.requires_grad]
    if not params:
        return
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
    torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.SUM)
    flat /= n
    offset = 0
    for p in params:
        count = p.numel()
        p.grad = flat[offset:offset + count].view_as(p).clone()
        offset += count


def any_rank(flag: bool, device: str) -> bool:
    """True on every rank when `flag` is true on at least one (e.g. a Ctrl-C seen by one rank),
    so that all ranks stop at the same iteration."""
    if world_size() == 1:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return bool(t.item())


def reduce_moments(count: float, mean: torch.Tensor, var: torch.Tensor):
    """The count, mean and (biased) variance of the union of every rank's samples, from each
    rank's own: global mean first, then the local variances around it (Chan et al.)."""
    if world_size() == 1:
        return count, mean, var
    total = torch.tensor([float(count)], device=mean.device, dtype=mean.dtype)
    torch.distributed.all_reduce(total)
    mean_sum = mean * count
    torch.distributed.all_reduce(mean_sum)
    global_mean = mean_sum / total
    var_sum = count * (var + (mean - global_mean).square())
    torch.distributed.all_reduce(var_sum)
    return float(total.item()), global_mean, var_sum / total
