"""The physics engine: one file per stage of MuJoCo's pipeline, built as Warp kernels."""
