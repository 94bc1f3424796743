"""Model registry: name -> builder, native input size, limits and parameter counts.

Random initialisation only (no weight downloads). Every framework builds its model here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scalebench.spec.errors import UserError

NUM_CLASSES = 1000
INCEPTION_AUX_MIN_SIZE = 299
AUX_LOSS_WEIGHT = 0.4


@dataclass(frozen=True)
class ModelInfo:
    name: str
    native_image_size: int
    min_image_size: int
    has_batch_norm: bool
    params: int
    params_without_aux: int | None = None

    def param_count(self, aux_logits: bool) -> int:
        if self.params_without_aux is not None and not aux_logits:
            return self.params_without_aux
        return self.params

    def min_batch(self) -> int:
        # Batch norm in training mode needs more than one value per channel.
        return 2 if self.has_batch_norm else 1


MODELS: dict[str, ModelInfo] = {
    "resnet101": ModelInfo("resnet101", 224, 32, True, 44_549_160),
    "inception_v3": ModelInfo("inception_v3", 299, 75, True, 27_161_264, 23_834_568),
    "vgg16": ModelInfo("vgg16", 224, 32, False, 138_357_544),
}


def model_names() -> list[str]:
    return list(MODELS)


def get_info(name: str) -> ModelInfo:
    try:
        return MODELS[name]
    except KeyError:
        raise UserError(
            f"models: unknown model {name!r}; allowed: {', '.join(MODELS)}"
        ) from None


def uses_aux_logits(model: str, image_size: int) -> bool:
    """Inception V3's auxiliary head only works at its full 299 px input."""
    return model == "inception_v3" and image_size >= INCEPTION_AUX_MIN_SIZE


def check_input(model: str, image_size: int, per_worker_batch: int) -> None:
    """Raise UserError for an input the model cannot train on, before anything is launched."""
    info = get_info(model)
    if image_size < info.min_image_size:
        raise UserError(
            f"image_size: {model} needs at least {info.min_image_size} px, got {image_size}"
        )
    if per_worker_batch < info.min_batch():
        raise UserError(
            f"batch_size: {model} has batch norm and needs at least {info.min_batch()} images "
            f"per worker in training, got {per_worker_batch}"
        )


def build_model(model: str, image_size: int):
    """Build a randomly initialised torchvision model. Returns (module, aux_logits)."""
    import torchvision.models as tvm

    aux = uses_aux_logits(model, image_size)
    builders: dict[str, Callable] = {
        "resnet101": lambda: tvm.resnet101(weights=None, num_classes=NUM_CLASSES),
        "vgg16": lambda: tvm.vgg16(weights=None, num_classes=NUM_CLASSES),
        "inception_v3": lambda: tvm.inception_v3(
            weights=None, num_classes=NUM_CLASSES, aux_logits=aux, init_weights=True
        ),
    }
    get_info(model)
    return builders[model](), aux


def compute_loss(output, target, criterion):
    """Cross entropy; Inception's training output carries the aux logits (weighted 0.4)."""
    if isinstance(output, tuple):  # torchvision InceptionOutputs(logits, aux_logits)
        logits, aux_logits = output[0], output[1]
        loss = criterion(logits, target)
        if aux_logits is not None:
            loss = loss + AUX_LOSS_WEIGHT * criterion(aux_logits, target)
        return loss
    return criterion(output, target)
