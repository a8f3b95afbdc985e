"""A small grid world with Dict observations (an image and a vector): stable-baselines3's ``SimpleMultiObsEnv``."""
from __future__ import annotations

from typing import Dict, List, Optional, Union

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class SimpleMultiObsEnv(gym.Env):
    """
    A 4x4 grid world whose observation is a Dict of a vector and an image (SB3's ``SimpleMultiObsEnv``)::

         ____________
        | 0  1  2   3|
        | 4|¯5¯¯6¯| 7|
        | 8|_9_10_|11|
        |12 13  14 15|
        ¯¯¯¯¯¯¯¯¯¯¯¯¯¯

    The agent starts in 0 (or anywhere but the goal with ``random_start``); 5, 6, 9 and 10 are blocked; the goal is 15.
    Actions: 0 left, 1 down, 2 right, 3 up. Reward -0.1 per step, 1.0 on reaching the goal (which ends the episode);
    episodes are truncated after 100 steps. Each column is shown as a random vector (``"vec"``, 5 floats in [0, 1])
    and each row as a random 64x64 grayscale image (``"img"``, uint8), both drawn once when the env is created
    (from NumPy's global generator, so ``set_global_seeds`` fixes them).

    :param num_col: (int) number of columns in the grid
    :param num_row: (int) number of rows in the grid
    :param random_start: (bool) start anywhere but the goal (else in state 0)
    :param discrete_actions: (bool) Discrete(4) actions; otherwise Box(0, 1, (4,)) scores whose argmax is taken
    :param channel_last: (bool) images (64, 64, 1) (sbtf's CNNs take channels last); else (1, 64, 64)
    """

    metadata = {"render_modes": ["human"]}

    def __init__(self, num_col: int = 4, num_row: int = 4, random_start: bool = True, discrete_actions: bool = True,
                 channel_last: bool = True):
        super().__init__()
        self.vector_size = 5
        self.img_size = [64, 64, 1] if channel_last else [1, 64, 64]
        self.random_start = random_start
        self.discrete_actions = discrete_actions
        self.action_space = spaces.Discrete(4) if discrete_actions else spaces.Box(0, 1, (4,))
        self.observation_space = spaces.Dict(spaces={
            "vec": spaces.Box(0, 1, (self.vector_size,), dtype=np.float64),
            "img": spaces.Box(0, 255, self.img_size, dtype=np.uint8),
        })
        self.count = 0
        self.max_count = 100
        self.log = ""
        self.state = 0
        self.action2str = ["left", "down", "right", "up"]
        self.init_possible_transitions()
        self.num_col = num_col
        self.state_mapping: List[Dict[str, np.ndarray]] = []
        self.init_state_mapping(num_col, num_row)
        self.max_state = len(self.state_mapping) - 1

    def init_state_mapping(self, num_col: int, num_row: int) -> None:
        """Draw the random vector of each column and the random image of each row."""
        col_vecs = np.random.random((num_col, self.vector_size))
        row_imgs = np.random.randint(0, 255, (num_row, 64, 64), dtype=np.uint8)
        for i in range(num_col):
            for j in range(num_row):
                self.state_mapping.append({"vec": col_vecs[i], "img": row_imgs[j].reshape(self.img_size)})

    def get_state_mapping(self) -> Dict[str, np.ndarray]:
        """The observation of the current state."""
        return self.state_mapping[self.state]

    def init_possible_transitions(self) -> None:
        """The states from which each move is possible (moves add or subtract 1 or one row to the state id)."""
        self.left_possible = [1, 2, 3, 13, 14, 15]
        self.down_possible = [0, 4, 8, 3, 7, 11]
        self.right_possible = [0, 1, 2, 12, 13, 14]
        self.up_possible = [4, 8, 12, 7, 11, 15]

    def step(self, action: Union[int, np.ndarray]):
        if not self.discrete_actions:
            action = int(np.argmax(action))
        action = int(action)
        self.count += 1
        prev_state = self.state
        if self.state in self.left_possible and action == 0:
            self.state -= 1
        elif self.state in self.down_possible and action == 1:
            self.state += self.num_col
        elif self.state in self.right_possible and action == 2:
            self.state += 1
        elif self.state in self.up_possible and action == 3:
            self.state -= self.num_col
        got_to_end = self.state == self.max_state
        reward = 1.0 if got_to_end else -0.1
        truncated = self.count > self.max_count
        self.log = f"Went {self.action2str[action]} in state {prev_state}, got to state {self.state}"
        return self.get_state_mapping(), reward, got_to_end, truncated, {"got_to_end": got_to_end}

    def render(self, mode: str = "human") -> None:
        print(self.log)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self.count = 0
        self.state = int(self.np_random.integers(0, self.max_state)) if self.random_start else 0
        return self.state_mapping[self.state], {}


__all__ = ["SimpleMultiObsEnv"]
