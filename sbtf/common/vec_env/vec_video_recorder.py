"""Recording videos of the rendered frames of a vectorized environment, and :func:`write_video` (mp4 files)."""
from __future__ import annotations

import json
import os
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from sbtf.common.vec_env.base_vec_env import VecEnv, VecEnvWrapper

#: what to install for mp4 videos
VIDEO_INSTALL_HINT = 'pip install "sbtf[video]" (imageio-ffmpeg, which ships its own ffmpeg)'


class VideoWriterMissing(ImportError):
    """Neither imageio-ffmpeg nor moviepy is installed: no library can write an mp4 file."""


def _even_frame(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """The frame as uint8 RGB, padded (edge pixels repeated) to ``height x width`` (H.264 needs even sizes)."""
    frame = np.asarray(frame, dtype=np.uint8)
    if frame.ndim == 2:
        frame = np.repeat(frame[:, :, None], 3, axis=2)
    frame = frame[:, :, :3]
    pad_h, pad_w = height - frame.shape[0], width - frame.shape[1]
    if pad_h or pad_w:
        frame = np.pad(frame, ((0, pad_h), (0, pad_w), (0, 0)), mode="edge")
    return np.ascontiguousarray(frame)


def write_video(frames: Sequence[np.ndarray], path: str, fps: float = 30.0) -> str:
    """
    Write RGB frames (``(height, width, 3)`` uint8 arrays, all the same size) as an H.264 mp4 video.

    The video is written with imageio-ffmpeg (the ``video`` extra: ``pip install "sbtf[video]"``, which ships its own
    ffmpeg binary) or, without it, with moviepy through gymnasium's ``save_video``. Odd sizes are padded by one pixel.

    :param frames: (sequence of np.ndarray) the frames
    :param path: (str) the output file (``.mp4``); its folder is created if needed
    :param fps: (float) frames per second
    :return: (str) the path written
    :raises VideoWriterMissing: neither imageio-ffmpeg nor moviepy is installed
    """
    if len(frames) == 0:
        raise ValueError("write_video: no frames to write to {}".format(path))
    first = np.asarray(frames[0])
    height, width = first.shape[0] + first.shape[0] % 2, first.shape[1] + first.shape[1] % 2
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    try:
        import imageio_ffmpeg  # pylint: disable=import-outside-toplevel
    except ImportError:
        imageio_ffmpeg = None
    if imageio_ffmpeg is not None:
        writer = imageio_ffmpeg.write_frames(path, (width, height), fps=float(fps), codec="libx264",
                                             pix_fmt_out="yuv420p", macro_block_size=1, ffmpeg_log_level="error")
        writer.send(None)  # start ffmpeg
        try:
            for frame in frames:
                writer.send(_even_frame(frame, height, width))
        finally:
            writer.close()
        return path
    try:
        from gymnasium.utils.save_video import save_video  # pylint: disable=import-outside-toplevel
    except ImportError as exc:  # gymnasium raises DependencyNotInstalled (an ImportError) without moviepy
        raise VideoWriterMissing("no library to write the video {}: {}".format(path, VIDEO_INSTALL_HINT)) from exc
    stem = os.path.splitext(os.path.basename(path))[0]
    save_video([_even_frame(frame, height, width) for frame in frames], folder, episode_trigger=lambda episode: True,
               name_prefix=stem, episode_index=0, fps=fps)
    os.replace(os.path.join(folder, "{}-episode-0.mp4".format(stem)), path)
    return path


class VecVideoRecorder(VecEnvWrapper):
    """
    Records the rendered frames of a VecEnv as videos.

    Frames are ``venv.render(mode='rgb_array')`` (the images of all envs, tiled), so the envs must be made with
    ``render_mode='rgb_array'``. A recording starts at ``reset()`` and whenever ``record_video_trigger(step_id)`` is
    True, and lasts ``video_length`` steps. Videos are mp4 files written by :func:`write_video` (imageio-ffmpeg, the
    ``video`` extra: ``pip install "sbtf[video]"``; or moviepy); without either the frames are saved as
    ``<name>.npz`` (array ``frames``, shape ``(n_frames, height, width, 3)``, plus ``fps``) and a warning says so.

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
            path = write_video(self.frames, base_path + ".mp4", fps=self.fps)
        except VideoWriterMissing:
            path = base_path + ".npz"
            np.savez_compressed(path, frames=np.stack(self.frames), fps=self.fps)
            warnings.warn("VecVideoRecorder: no video library is installed, so the frames were saved as {} (array "
                          "'frames') instead of an mp4 video; {} to get videos".format(path, VIDEO_INSTALL_HINT))
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
