"""The exported policy's metadata (simrl.rl.export, envs.legged policy_metadata): read back from
policy.onnx with onnxruntime, as a robot's runtime would, it alone turns a simulation state into
the observation the env gives the policy and the policy's action into the joint targets the env
applies; policy.pt carries the same."""

import json

import mujoco
import numpy as np
import onnxruntime
import pytest
import torch
from omegaconf import OmegaConf

import envs
import tasks
from envs.rsl_rl import RslRlVecEnv
from simrl.rl import export
from simrl.rl.ppo import Runner, rsl_rl_config


def _rotate_inverse(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """v [3] in the frame of the unit quaternion q (w, x, y, z): R(q)^T v."""
    w, x, y, z = q
    r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                  [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                  [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return r.T @ v


def _raw_terms(meta: dict, mjm: mujoco.MjModel, qpos, qvel, sensordata, command, last_action) -> dict:
    """Each observation term's raw value for one world, from what a robot has (its joint encoders,
    IMU, the operator's command, its last action) and the metadata's names only."""
    def sensor(name):
        s = mjm.sensor(name)
        return sensordata[s.adr[0]:s.adr[0] + s.dim[0]]

    imu = meta["imu_sensors"]
    qadr = [mjm.joint(n).qposadr[0] for n in meta["observed_joint_names"]]
    dadr = [mjm.joint(n).dofadr[0] for n in meta["observed_joint_names"]]
    return {"base_lin_vel": sensor(imu["lin_vel"]), "base_ang_vel": sensor(imu["ang_vel"]),
            "projected_gravity": _rotate_inverse(sensor(imu["orientation"]), np.array([0.0, 0.0, -1.0])),
            "commands": command, "joint_pos": qpos[qadr] - np.array(meta["observed_default_joint_pos"]),
            "joint_vel": qvel[dadr], "last_action": last_action}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The quadruped task (no observation noise) with a PPO policy of random weights, exported as
    play.py exports it."""
    task = tasks.load("quadruped")
    env = envs.make("quadruped", num_envs=3, device="cpu", seed=3, obs_noise=0.0,
                    **{k: v for k, v in OmegaConf.to_container(task.env).items() if k != "obs_noise"},
                    robot=OmegaConf.to_container(task.robot))
    runner = Runner(RslRlVecEnv(env), rsl_rl_config(OmegaConf.to_container(task.ppo)), log_dir=None, device="cpu",
                    key_terms=[])
    out = tmp_path_factory.mktemp("export")
    runner.export_policy_to_onnx(str(out), "policy.onnx")
    runner.export_policy_to_jit(str(out), "policy.pt")
    export.write_metadata(out, {"task": "quadruped", **env.policy_metadata()})
    return env, runner, out


def test_onnx_metadata_alone_runs_the_policy_as_the_env_does(exported):
    env, runner, out = exported
    session = onnxruntime.InferenceSession(str(out / "policy.onnx"))
    meta = {k: json.loads(v) for k, v in session.get_modelmeta().custom_metadata_map.items()}
    assert meta["task"] == "quadruped" and meta["control_period_s"] == pytest.approx(0.02)
    assert meta["joint_names"][:3] == ["FR_hip_abduction", "FR_hip_flexion", "FR_knee"] and meta["num_actions"] == 12
    assert meta["default_joint_pos"][:3] == [0.0, 0.8, -1.5] and meta["action_scale"] == [0.25] * 12
    assert meta["stiffness"] == [30.0] * 12 and meta["damping"] == [1.0] * 12
    assert meta["effort_limit"][:3] == [25.0, 25.0, 35.0]  # the quadruped's servos' forcerange
    assert [t["name"] for t in meta["observation_terms"]] == list(env.POLICY_TERMS)
    assert meta["num_observations"] == sum(t["size"] for t in meta["observation_terms"]) == 48

    policy = runner.get_inference_policy(device="cpu")
    obs = env.reset()
    mjm = env.sim.mj_model
    sent = [np.zeros((env.num_envs, 12))] * 2  # the actions sent, the latest last
    for _ in range(4):
        # the observation from the state, the command and the last action through the metadata alone
        qpos, qvel = env.sim.qpos.double().numpy(), env.sim.qvel.double().numpy()
        sensordata = env.sim.sensordata.double().numpy()
        frames = []
        for w in range(env.num_envs):
            raw = _raw_terms(meta, mjm, qpos[w], qvel[w], sensordata[w], env.commands[w].double().numpy(),
                             sent[-2][w])  # last_action: the one before the latest (its meaning)
            frames.append(np.concatenate([np.asarray(raw[t["name"]]) * np.asarray(t["scale"])
                                          for t in meta["observation_terms"]]))
        built = np.stack(frames).astype(np.float32)
        np.testing.assert_allclose(built, obs["policy"].numpy(), atol=2e-5)
        # the ONNX policy on it acts as the env's own policy path
        onnx_actions = np.concatenate([session.run(None, {"obs": built[w:w + 1]})[0] for w in range(env.num_envs)])
        with torch.no_grad():
            actions = policy(obs)
        np.testing.assert_allclose(onnx_actions, actions.numpy(), atol=1e-5)
        # the joint targets from the metadata: default + scale x action, clamped to the target range
        targets = np.clip(np.array(meta["default_joint_pos"]) + np.array(meta["action_scale"]) * onnx_actions,
                          meta["joint_pos_target_min"], meta["joint_pos_target_max"])
        obs, _, terminated, time_outs, _ = env.step(actions)
        assert not (terminated | time_outs).any()  # no reset: the state below follows from these actions
        adr = [mjm.joint(n).qposadr[0] for n in meta["joint_names"]]
        assert adr == env.robot.actuator_qposadr
        np.testing.assert_allclose(env.sim.ctrl.numpy(), targets, atol=1e-5)
        sent.append(actions.numpy().astype(np.float64))


def test_torchscript_carries_the_same_metadata(exported):
    _, _, out = exported
    assert export.read_jit_metadata(out / "policy.pt") == export.read_onnx_metadata(out / "policy.onnx")
    files = {export.JIT_METADATA_FILE: ""}
    module = torch.jit.load(str(out / "policy.pt"), _extra_files=files)
    assert json.loads(files[export.JIT_METADATA_FILE])["joint_names"][0] == "FR_hip_abduction"
    session = onnxruntime.InferenceSession(str(out / "policy.onnx"))
    x = np.random.default_rng(0).normal(size=(1, 48)).astype(np.float32)
    np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), session.run(None, {"obs": x})[0],
                               atol=1e-5)
    with pytest.raises(ValueError, match="policy metadata 'bad': not JSON"):  # JSON has no infinity
        export.write_onnx_metadata(out / "policy.onnx", {"bad": float("inf")})
    assert "bad" not in export.read_onnx_metadata(out / "policy.onnx")


def test_metadata_names_the_gait_clock_and_the_dc_motor_curve():
    env = envs.make("quadruped", num_envs=1, device="cpu", seed=0, gait_period=0.5, observation_source="state",
                    actuator={"type": "dc_motor", "saturation_effort": 40.0, "velocity_limit": 20.0})
    meta = env.policy_metadata()
    assert meta["observation_terms"][-1]["name"] == "gait_phase" and meta["num_observations"] == 50
    assert meta["gait_period_s"] == 0.5 and meta["gait_offsets"] == [0.0, 0.5, 0.5, 0.0]
    assert meta["saturation_effort"] == [40.0] * 12 and meta["velocity_limit"] == [20.0] * 12
    assert meta["imu_sensors"] is None and "base body (trunk)" in meta["observation_terms"][0]["meaning"]
