"""The diffusers models of the ``generative`` collection: UNet2DModel and AutoencoderKL from configs.

Random init, no download; each behind :class:`nets.DiffusersOutput` (``return_dict=False``, the first output).
UNet2DModel: ``forward(noisy images, timesteps)`` -> predicted noise; small: 16x16 images, blocks of 16
and 32 channels (the second with attention), one layer a block, 8 groups, batch 2; full: the DDPM
CIFAR-10 shape (32x32, 128-256-256-256 channels, 2 layers a block), batch 32. AutoencoderKL:
``forward(images)`` -> reconstruction through the posterior's mode (``sample_posterior=False``: no
random sampling); small: 32x32, 16 and 32 channels, 4 latent channels, batch 2; full: Stable
Diffusion's VAE shape (128-256-512-512) on 256x256, batch 4.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from pytest_xla_dynamo.zoo.family import Row
from pytest_xla_dynamo.zoo.family import specs as _specs
from pytest_xla_dynamo.zoo.spec import ModelSpec

if TYPE_CHECKING:
    import torch

SOURCE = "diffusers"
REQUIRES = ("torch", "diffusers")


def unet2d(tier: str, **config: Any) -> torch.nn.Module:
    import diffusers

    from pytest_xla_dynamo.zoo import nets

    return nets.DiffusersOutput(cast(Any, diffusers.UNet2DModel(**config)))  # typed as Any: with or without diffusers


def autoencoder_kl(tier: str, **config: Any) -> torch.nn.Module:
    import diffusers

    from pytest_xla_dynamo.zoo import nets

    return nets.DiffusersOutput(cast(Any, diffusers.AutoencoderKL(**config)), sample_posterior=False)


def noisy_images(tier: str, batch: int, *, res: int) -> tuple[torch.Tensor, ...]:
    """Standard-normal images (``batch x 3 x res x res``) and int64 timesteps in [0, 1000)."""
    import torch

    return torch.randn(batch, 3, res, res), torch.randint(0, 1000, (batch,))


def images(tier: str, batch: int, *, res: int) -> tuple[torch.Tensor, ...]:
    import torch

    return (torch.randn(batch, 3, res, res),)


_UNET_SMALL = {"sample_size": 16, "in_channels": 3, "out_channels": 3, "layers_per_block": 1,
               "block_out_channels": (16, 32), "down_block_types": ("DownBlock2D", "AttnDownBlock2D"),
               "up_block_types": ("AttnUpBlock2D", "UpBlock2D"), "norm_num_groups": 8}
_UNET_FULL = {"sample_size": 32, "in_channels": 3, "out_channels": 3, "layers_per_block": 2,
              "block_out_channels": (128, 256, 256, 256),
              "down_block_types": ("DownBlock2D", "AttnDownBlock2D", "DownBlock2D", "DownBlock2D"),
              "up_block_types": ("UpBlock2D", "UpBlock2D", "AttnUpBlock2D", "UpBlock2D")}
_VAE_SMALL = {"in_channels": 3, "out_channels": 3, "block_out_channels": (16, 32), "latent_channels": 4,
              "down_block_types": ("DownEncoderBlock2D",) * 2, "up_block_types": ("UpDecoderBlock2D",) * 2,
              "norm_num_groups": 8, "layers_per_block": 1, "sample_size": 32}
_VAE_FULL = {"in_channels": 3, "out_channels": 3, "block_out_channels": (128, 256, 512, 512), "latent_channels": 4,
             "down_block_types": ("DownEncoderBlock2D",) * 4, "up_block_types": ("UpDecoderBlock2D",) * 4,
             "layers_per_block": 2, "sample_size": 256}

ROWS: tuple[Row, ...] = (
    Row("generative", "unet2d", SOURCE, REQUIRES, unet2d, (_UNET_SMALL, _UNET_FULL),
        noisy_images, ({"res": 16}, {"res": 32}), (2, 32), False,
        "diffusers.UNet2DModel from a config, forward(images, timesteps) -> predicted noise."),
    Row("generative", "autoencoder_kl", SOURCE, REQUIRES, autoencoder_kl, (_VAE_SMALL, _VAE_FULL),
        images, ({"res": 32}, {"res": 256}), (2, 4), False,
        "diffusers.AutoencoderKL from a config, forward(images) -> reconstruction (posterior mode)."),
)


def specs() -> list[ModelSpec]:
    """The specs of :data:`ROWS`, in table order."""
    return _specs(ROWS)
