"""Videos: ``write_video`` (mp4 through imageio-ffmpeg), ``VecVideoRecorder`` on ``make_vec_env`` envs,
stable-baselines' GIF recipe ``model.env.render(mode='rgb_array')``, and ``sbtf enjoy --video``."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re

import gymnasium
import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from sbtf.common.cmd_util import make_vec_env, render_mode_kwargs, supported_render_modes
from sbtf.common.vec_env import VecVideoRecorder
from sbtf.common.vec_env.vec_video_recorder import write_video

imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="the video extra (pip install 'sbtf[video]')")

NUMPY_ENV_ID = "SbtfVideoTestCartPole-v0"


class NumpyDrawnCartPole(CartPoleEnv):
    """CartPole drawn with NumPy: a black cart on white, 64 x 96 frames (no pygame, any machine)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def render(self):
        frame = np.full((64, 96, 3), 255, dtype=np.uint8)
        x = int(np.clip((self.state[0] + 2.4) / 4.8 * 95, 0, 95))
        frame[40:50, max(x - 6, 0):x + 7] = 0
        return frame


if NUMPY_ENV_ID not in gymnasium.registry:
    gymnasium.register(NUMPY_ENV_ID, entry_point=NumpyDrawnCartPole, max_episode_steps=30)


def read_video(path: str):
    """(metadata, frames) of an mp4 file, decoded by ffmpeg."""
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    width, height = meta["size"]
    frames = [np.frombuffer(frame, dtype=np.uint8).reshape(height, width, 3) for frame in reader]
    return meta, frames


def test_write_video_round_trip_keeps_frame_count_fps_and_colours(tmp_path):
    # odd sizes are padded to even ones (H.264 with yuv420p needs them)
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)]
    frames = [np.full((33, 51, 3), colour, dtype=np.uint8) for colour in colours for _ in range(5)]
    path = write_video(frames, str(tmp_path / "sub" / "colours.mp4"), fps=10)
    meta, decoded = read_video(path)
    assert meta["codec"] == "h264" and meta["fps"] == 10.0 and meta["size"] == (52, 34)
    assert len(decoded) == len(frames)
    for index, colour in enumerate(colours):
        centre = decoded[index * 5 + 2][17, 25].astype(int)
        assert np.all(np.abs(centre - np.array(colour)) < 40), (index, centre)
    with pytest.raises(ValueError, match="no frames"):
        write_video([], str(tmp_path / "empty.mp4"))


def test_make_vec_env_makes_renderable_envs_by_default():
    assert "rgb_array" in supported_render_modes("CartPole-v1")
    assert supported_render_modes("NoSuchEnv-v0") == []
    assert render_mode_kwargs("CartPole-v1") == {"render_mode": "rgb_array"}
    assert render_mode_kwargs("CartPole-v1", {"render_mode": "human"}) == {}  # the user's choice wins
    assert render_mode_kwargs(CartPoleEnv) == {}  # a class: its own arguments decide

    env = make_vec_env(NUMPY_ENV_ID, n_envs=2, seed=0)
    env.reset()
    assert env.get_attr("render_mode") == ["rgb_array", "rgb_array"]
    assert env.render(mode="rgb_array").shape == (2 * 64, 96, 3)  # two frames tiled (SB2 tile_images: a column)
    env.close()

    plain = make_vec_env(NUMPY_ENV_ID, n_envs=1, render_mode=None)
    plain.reset()
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        plain.render(mode="rgb_array")
    plain.close()


def test_sb2_gif_recipe_on_a_model_made_from_an_env_id():
    """stable-baselines' README recipe: ``model.env.render(mode='rgb_array')`` after ``A2C(policy, 'CartPole-v1')``."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    from sbtf import A2C

    model = A2C("MlpPolicy", "CartPole-v1", n_steps=5)
    images = []
    obs = model.env.reset()
    img = model.env.render(mode="rgb_array")
    for _ in range(5):
        images.append(img)
        action, _ = model.predict(obs)
        obs, _, _, _ = model.env.step(action)
        img = model.env.render(mode="rgb_array")
    assert all(image.shape == (400, 600, 3) and image.dtype == np.uint8 for image in images)
    assert images[0].min() == 0 and images[0].max() == 255  # a drawn cart on a white background


def test_vec_video_recorder_writes_mp4_files(tmp_path):
    env = make_vec_env(NUMPY_ENV_ID, n_envs=1, seed=0)
    recorder = VecVideoRecorder(env, str(tmp_path / "videos"), record_video_trigger=lambda step: step == 20,
                                video_length=10, name_prefix="agent")
    recorder.reset()
    for _ in range(40):
        recorder.step(np.array([recorder.action_space.sample()]))
    recorder.close()
    assert [os.path.basename(path) for path in recorder.saved_paths] == [
        "agent-step-0-to-step-10.mp4", "agent-step-20-to-step-30.mp4"]
    for path in recorder.saved_paths:
        meta, frames = read_video(path)
        assert len(frames) == 11 and meta["fps"] == 20.0 and meta["size"] == (96, 64)
        with open(path[:-len(".mp4")] + ".meta.json", encoding="utf-8") as handle:
            assert json.load(handle)["n_frames"] == 11


def test_enjoy_writes_a_video_and_a_gif_of_the_same_frames(tmp_path, capsys):
    from PIL import Image
    from sbtf.cli import main

    logs = tmp_path / "logs"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["train", "--algo", "a2c", "--env", NUMPY_ENV_ID, "-n", "200", "-f", str(logs), "--eval-freq",
                     "0", "--no-progress", "--verbose", "0"]) == 0
    video, gif = tmp_path / "out" / "play.mp4", tmp_path / "out" / "play.gif"
    capsys.readouterr()
    assert main(["enjoy", "--algo", "a2c", "--env", NUMPY_ENV_ID, "-f", str(logs), "-n", "15", "--video", str(video),
                 "--gif", str(gif)]) == 0
    out = capsys.readouterr().out
    n_frames = int(re.search(r"^Saved a video of (\d+) frames \(20 fps\) to ", out, flags=re.M).group(1))
    assert "Saved a GIF of {} frames to {}".format(n_frames, gif) in out
    assert n_frames == 16  # the reset frame and one per step
    meta, frames = read_video(video)
    assert len(frames) == n_frames and meta["size"] == (96, 64)
    with Image.open(gif) as image:
        assert image.size == (96, 64)
    assert main(["enjoy", "--algo", "a2c", "--env", NUMPY_ENV_ID, "-f", str(logs), "--video", str(video),
                 "--render"]) == 2
    assert "--video and --render cannot be used together" in capsys.readouterr().err
