"""MJCF models written for the tests: each exercises features the gymnasium models do not."""

# Ball joints in a chain, rotated inertial frames (fullinertia), armature, damping, ball and
# hinge springs with springref; RK4 so orientations go through the Munthe-Kaas stages.
BALL_CHAIN = """
<mujoco model="ball_chain">
  <option timestep="0.005" integrator="RK4"/>
  <worldbody>
    <body name="b1" pos="0 0 1">
      <joint name="ball1" type="ball" damping="0.05" armature="0.01" stiffness="0.3"/>
      <inertial pos="0.02 0.01 -0.2" mass="1.3" fullinertia="0.05 0.04 0.02 0.004 -0.003 0.002"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.04"/>
      <body name="b2" pos="0 0 -0.4" quat="0.9 0.1 0.3 0.2">
        <joint name="ball2" type="ball" armature="0.02"/>
        <inertial pos="0.01 -0.02 -0.15" quat="0.8 0.2 -0.1 0.3" mass="0.7" diaginertia="0.02 0.015 0.005"/>
        <geom type="box" size="0.05 0.05 0.15" pos="0 0 -0.15"/>
        <body name="b3" pos="0 0 -0.3">
          <joint name="hinge3" type="hinge" axis="1 1 0" damping="0.1" stiffness="2" springref="20"/>
          <geom type="sphere" size="0.07" pos="0.05 0 -0.1" mass="0.4"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="hinge3" gear="3" ctrlrange="-1 1" ctrllimited="true"/>
  </actuator>
</mujoco>
"""

# Slide and hinge joints, two joints on one body, gear ratios, position / velocity /
# general-affine actuators, control and force clamping, joint-level actuator force limits,
# Euler with implicit damping.
SLIDE_HINGE = """
<mujoco model="slide_hinge">
  <option timestep="0.002" integrator="Euler"/>
  <worldbody>
    <body name="cart" pos="0 0 0.5">
      <joint name="slide_x" type="slide" axis="1 0 0" damping="0.5" armature="0.1"/>
      <joint name="slide_y" type="slide" axis="0 1 0.2" damping="0.2"/>
      <geom type="box" size="0.2 0.1 0.05" mass="2"/>
      <body name="arm" pos="0.1 0 0.05" euler="10 20 30">
        <joint name="shoulder" type="hinge" axis="0 1 0" pos="0 0 0.02" damping="0.3"
               actuatorfrcrange="-4 4"/>
        <joint name="twist" type="hinge" axis="0 0 1" armature="0.05" stiffness="1.5"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0.1" size="0.03" mass="0.6"/>
        <body name="hand" pos="0.4 0 0.1">
          <joint name="wrist" type="hinge" axis="1 0 0"/>
          <joint name="finger" type="slide" axis="0 0 1" pos="0.05 0 0" damping="1"/>
          <geom type="sphere" size="0.05" mass="0.3"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="slide_x" gear="20" ctrlrange="-1 1" ctrllimited="true"/>
    <position joint="shoulder" kp="30" gear="2" ctrlrange="-1.5 1.5" forcerange="-10 10"/>
    <velocity joint="twist" kv="3" gear="0.5"/>
    <general joint="wrist" gaintype="affine" gainprm="2 0.5 0.1" biastype="affine" biasprm="0.3 -1 -0.2"
             ctrlrange="-2 2" ctrllimited="true"/>
    <position joint="finger" kp="50" kv="2"/>
  </actuator>
</mujoco>
"""

# Two floating trees (two free joints), a ball joint under a free body, a body welded to its
# parent (no joint), springs on the free joint, Euler with damping.
TWO_TREES = """
<mujoco model="two_trees">
  <option timestep="0.004" integrator="Euler"/>
  <worldbody>
    <body name="a" pos="0 0 1">
      <freejoint name="free_a"/>
      <geom type="box" size="0.1 0.2 0.05" mass="1.5"/>
      <body name="a_leg" pos="0.1 0 -0.05">
        <joint name="a_ball" type="ball" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0.1 -0.3" size="0.03" mass="0.4"/>
        <body name="a_foot" pos="0 0.1 -0.3" euler="0 0 45">
          <geom type="box" size="0.05 0.08 0.02" pos="0.02 0 0" mass="0.3"/>
        </body>
      </body>
    </body>
    <body name="b" pos="1 0 1" euler="0 30 0">
      <joint name="free_b" type="free" stiffness="3" damping="0.2"/>
      <inertial pos="0.05 0 0" quat="0.7 0.1 0.7 0" mass="0.8" diaginertia="0.01 0.02 0.03"/>
      <geom type="sphere" size="0.1"/>
      <body name="b_arm" pos="0 0 0.1">
        <joint name="b_hinge" type="hinge" axis="0 1 1" damping="0.05" armature="0.01"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.2"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="b_hinge" gear="0.7"/>
  </actuator>
</mujoco>
"""

CUSTOM_MODELS = {"ball_chain": BALL_CHAIN, "slide_hinge": SLIDE_HINGE, "two_trees": TWO_TREES}
