"""Recording videos of the rendered frames of a vectorized environment."""
from __future__ import annotations

import json
import os
import warnings
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from sbtf.common.vec_env.base_vec_env import VecEnv, VecEnvWrapper


class VecVideoRecorder(VecEnvWrapper):
    """
    Records the rendered frames of a VecEnv as videos.

    Frames are ``venv.render(mode='rgb_array')`` (the images of all envs, tiled), so the envs must be made with
    ``render_mode='rgb_array'``. A recording starts at ``reset()`` and whenever ``record_video_trigger(step_id)`` is
    True, and lasts ``video_length`` steps. Videos are written with gymnasium's video utilities (they need moviepy:
    ``pip install moviepy``); without moviepy the frames are saved as ``<name>.npz`` (array ``frames``, shape
    ``(n_frames, height, width, 3)``, plus ``fps``) and a warning says so.

    :param venv: (VecEnv or VecEnvWrapper)
    :param video_folder: (str) the folder the videos are written to (created if needed)
    :param record_video_trigger: (func) ``f(step_id) -> bool``: start a recording at this step?
    :param video_length: (int) number of steps in each video
    :param name_prefix: (str) start of the file names
    """

    def __init__(self, venv: VecEnv, video_folder: str, record_video_trigger: Callable[[int], bool],
                 video_length: int = 200, name_prefix: str = 'rl-video'):
        VecEnvWrapper.__init__(self, venv)
        self.env = venv
        render_modes = venv.get_attr("render_mode")
        if any(mode != "rgb_array" for mode in render_modes):
            raise ValueError("VecVideoRecorder needs envs made with render_mode='rgb_array' (e.g. "
                             "gymnasium.make(env_id, render_mode='rgb_array')); got render modes {}".format(
                                 render_modes))
        metadata = venv.get_attr("metadata")[0]
        self.metadata = metadata
        self.fps = int(metadata.get("render_fps") or metadata.get("video.frames_per_second") or 30)

        self.record_video_trigger = record_video_trigger
        self.video_folder = os.path.abspath(video_folder)
        # Create output folder if needed
        os.makedirs(self.video_folder, exist_ok=True)

        self.name_prefix = name_prefix
        self.step_id = 0
        self.video_length = video_length

        self.recording = False
        self.recorded_frames = 0
        self.frames: List[np.ndarray] = []
        self.video_name: Optional[str] = None
        self.video_start_step = 0
        # Paths of the files written so far (videos, or .npz frame files without moviepy).
        self.saved_paths: List[str] = []

    def reset(self):
        obs = self.venv.reset()
        self.start_video_recorder()
        return obs

    def start_video_recorder(self) -> None:
        """Start a new recording (closing the current one, if any) with the frame of the current state."""
        self.close_video_recorder()
        self.video_name = '{}-step-{}-to-step-{}'.format(self.name_prefix, self.step_id,
                                                         self.step_id + self.video_length)
        self.video_start_step = self.step_id
        self.frames = []
        self._capture_frame()
        self.recorded_frames = 1
        self.recording = True

    def _capture_frame(self) -> None:
        frame = self.venv.render(mode="rgb_array")
        if not isinstance(frame, np.ndarray):
            raise ValueError("VecVideoRecorder: render(mode='rgb_array') returned {}, not an image".format(
                type(frame).__name__))
        self.frames.append(np.asarray(frame, dtype=np.uint8))

    def _video_enabled(self) -> bool:
        return self.record_video_trigger(self.step_id)

    def step_wait(self):
        obs, rews, dones, infos = self.venv.step_wait()

        self.step_id += 1
        if self.recording:
            self._capture_frame()
            self.recorded_frames += 1
            if self.recorded_frames > self.video_length:
                self.close_video_recorder()
        elif self._video_enabled():
            self.start_video_recorder()

        return obs, rews, dones, infos

    def close_video_recorder(self) -> None:
        """Write the current recording (if any) to disk."""
        if self.recording and self.frames:
            self._write_video()
        self.recording = False
        self.recorded_frames = 1
        self.frames = []

    def _write_video(self) -> None:
        base_path = os.path.join(self.video_folder, self.video_name)
        meta: Dict[str, Any] = {"step_id": self.video_start_step, "n_frames": len(self.frames), "fps": self.fps}
        try:
            from gymnasium.utils.save_video import save_video
        except ImportError:  # gymnasium raises DependencyNotInstalled (an ImportError) without moviepy
            save_video = None
        if save_video is not None:
            save_video(list(self.frames), self.video_folder, episode_trigger=lambda episode: True,
                       name_prefix=self.video_name, episode_index=0, fps=self.fps)
            written = os.path.join(self.video_folder, "{}-episode-0.mp4".format(self.video_name))
            path = base_path + ".mp4"
            os.replace(written, path)
        else:
            path = base_path + ".npz"
            np.savez_compressed(path, frames=np.stack(self.frames), fps=self.fps)
            warnings.warn("VecVideoRecorder: moviepy is not installed, so the frames were saved as {} (array "
                          "'frames') instead of an mp4 video; `pip install moviepy` to get videos".format(path))
        meta["path"] = path
        with open(base_path + ".meta.json", "w") as file_handler:
            json.dump(meta, file_handler)
        self.saved_paths.append(path)

    def close(self) -> None:
        VecEnvWrapper.close(self)
        self.close_video_recorder()

    def __del__(self):
        try:
            if self.__dict__.get("recording"):
                self.close_video_recorder()
        except Exception:
            pass
