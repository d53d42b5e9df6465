"""One rank of a 2-process run, started by tests/test_distributed.py under torchrun:

    torchrun --nproc_per_node=2 tests/distributed_worker.py {ppo|shac} OUT_DIR

Each rank builds its own cart-pole worlds (seed 42 + RANK) and networks from its own seed (the
broadcast from rank 0 must make them equal), runs one training iteration of the algorithm, and
saves to OUT_DIR/rank<RANK>.pt what it had just before the update (networks, optimizer state,
its rollout or environment state) and after it (networks, gradients). The test rebuilds the same
update in one process from both ranks' data and compares.
"""

import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

import envs  # noqa: E402
import tasks  # noqa: E402
from envs.rsl_rl import RslRlVecEnv  # noqa: E402
from simrl.rl import distributed  # noqa: E402
from simrl.rl.ppo import Runner, rsl_rl_config  # noqa: E402
from simrl.rl.shac import ShacRunner  # noqa: E402

NUM_ENVS = 8  # per rank
PPO_STEPS = 8
#: full-batch updates, so that averaging the ranks' gradients is exactly the combined batch's
PPO_OVERRIDES = {"num_mini_batches": 1, "num_learning_epochs": 2}
#: a deterministic policy (exploration noise exp(-50) ~ 1e-22 vanishes against the mean in
#: float32) and full-batch critic steps, for the same reason
SHAC_CFG = {"horizon": 16, "critic_mini_batches": 1, "critic_iterations": 2, "init_log_std": -50.0,
            "actor_learning_rate": 1e-2, "critic_learning_rate": 1e-3}


def clone_state(module) -> dict:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def grads(module) -> dict:
    return {k: p.grad.detach().clone() for k, p in module.named_parameters() if p.grad is not None}


def ppo_runner(num_envs: int, seed: int) -> Runner:
    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "cartpole.yaml"), resolve=True)
    ppo = task["ppo"]
    ppo["num_steps_per_env"] = PPO_STEPS
    ppo["algorithm"].update(PPO_OVERRIDES)
    env = envs.make("cartpole", num_envs=num_envs, device="cpu", seed=seed, **task["env"])
    return Runner(RslRlVecEnv(env), rsl_rl_config(ppo), log_dir=None, device="cpu", key_terms=[], task="cartpole")


def shac_runner(num_envs: int, seed: int) -> ShacRunner:
    env = envs.make("cartpole_swingup", num_envs=num_envs, device="cpu", seed=seed, episode_length_s=5.0)
    runner = ShacRunner(env, dict(SHAC_CFG), log_dir=None, device="cpu", key_terms=[], max_iterations=10)
    runner.actor.log_std.requires_grad_(False)  # its gradient is the vanishing noise's: not comparable
    return runner


def run_ppo(rank: int) -> dict:
    runner = ppo_runner(NUM_ENVS, seed=42 + rank)
    alg, record = runner.alg, {}
    update = alg.update

    def recorded_update():
        s = alg.storage
        record["before"] = {"actor": clone_state(alg.actor), "critic": clone_state(alg.critic),
                            "optimizer": copy.deepcopy(alg.optimizer.state_dict()),
                            "learning_rate": alg.learning_rate}
        record["storage"] = {"observations": {k: v.clone() for k, v in s.observations.items()},
                             **{k: getattr(s, k).clone() for k in ("actions", "values", "returns", "advantages",
                                                                   "actions_log_prob")},
                             "distribution_params": [p.clone() for p in s.distribution_params]}
        return update()

    alg.update = recorded_update
    runner.learn(1)
    record["after"] = {"actor": clone_state(alg.actor), "critic": clone_state(alg.critic),
                       "actor_grads": grads(alg.actor), "critic_grads": grads(alg.critic),
                       "learning_rate": alg.learning_rate}
    return record


def run_shac(rank: int) -> dict:
    runner = shac_runner(NUM_ENVS, seed=42 + rank)
    iteration, record = runner._iteration, {}

    def recorded_iteration():
        # after learn's broadcast: what every rank starts the update from
        record["before"] = {name: clone_state(getattr(runner, name)) for name in (
            "actor", "critic", "target_critic", "obs_normalizer", "critic_obs_normalizer")}
        record["env"] = runner.env.state_dict()
        return iteration()

    runner._iteration = recorded_iteration
    runner.learn(1)
    record["after"] = {name: clone_state(getattr(runner, name)) for name in (
        "actor", "critic", "target_critic", "obs_normalizer", "critic_obs_normalizer")}
    record["after"]["actor_grads"] = grads(runner.actor)
    record["after"]["critic_grads"] = grads(runner.critic)
    return record


def main(mode: str, out: str) -> None:
    info = distributed.from_environment()
    distributed.init(info, "cpu", timeout_s=120)
    torch.manual_seed(1000 + info.rank)  # different networks on each rank until the broadcast
    record = run_ppo(info.rank) if mode == "ppo" else run_shac(info.rank)
    torch.save(record, Path(out) / f"rank{info.rank}.pt")
    distributed.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
