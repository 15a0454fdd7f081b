r"""A mosaic set on the device, normalised per batch (V&R Sec. 5's CIFAR mosaics).

:class:`ImageStore` keeps mosaics X (N, m, 3, H, W) and foreground positions z
on the training device. uint8 CIFAR pixels stay uint8 (4x smaller) and are
normalised per batch by table lookup, exactly as the core's
:func:`minimal_attn.datasets.mosaics.to_float_images`; float images are kept as float32.
"""

import numpy as np
import torch

from minimal_attn.datasets.mosaics import pixel_scaling, to_float_images


def _pixel_table(pixels="standard"):
    """(3, 256) float32: ``to_float_images`` of every uint8 value in every channel, under
    the scaling ``pixels`` (:data:`minimal_attn.datasets.mosaics.PIXEL_SCALINGS`).

    Normalising a uint8 batch on the device by table lookup gives exactly the
    core's :func:`minimal_attn.datasets.mosaics.to_float_images` while the data set stays
    uint8 (4x smaller) in device memory.
    """
    probe = np.repeat(np.arange(256, dtype=np.uint8)[:, None, None, None], 3, axis=1)
    return to_float_images(probe, *pixel_scaling(pixels))[:, :, 0, 0].T.copy()   # (3, 256)


class ImageStore:
    """Mosaics X (N, m, 3, H, W) and positions z on the device; ``store[idx]`` is float32
    (uint8 pixels scaled by ``pixels``, :data:`~minimal_attn.datasets.mosaics.PIXEL_SCALINGS`)."""

    def __init__(self, X, device, z=None, pixels="standard"):
        X = np.asarray(X)
        self.table = None
        if X.dtype == np.uint8:
            self.table = torch.as_tensor(_pixel_table(pixels), device=device)
            self.channel = torch.arange(3, device=device).view(3, 1, 1)
        elif X.dtype != np.float32:
            X = X.astype(np.float32)
        self.X = torch.as_tensor(X, device=device)
        self.z = None if z is None else torch.as_tensor(np.asarray(z), device=device)
        self.n = X.shape[0]

    def __getitem__(self, idx):
        batch = self.X[idx.to(self.X.device)]                             # (B, m, 3, H, W)
        if self.table is None:
            return batch
        return self.table[self.channel, batch.long()]                     # (B, m, 3, H, W)
