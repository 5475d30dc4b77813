"""The architectures of the guide's 12 checkpoints, as configurations and processors (docs/models.md).

Each entry rebuilds its checkpoint's architecture offline, with exactly its parameter count (pinned in
tests/zoo/test_loading.py), and states its image processor's resize and normalisation, so that offline inputs have
the shapes the checkpoint's own processor would give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
HALF = [0.5, 0.5, 0.5]
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

SWIN_STAGES = ["stage1", "stage2", "stage3", "stage4"]
SWIN_TINY = dict(model_type="swin", embed_dim=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24],
                 window_size=7, image_size=224, drop_path_rate=0.3, out_features=SWIN_STAGES)
SWIN_BASE_384 = dict(model_type="swin", embed_dim=128, depths=[2, 2, 18, 2],
                     num_heads=[4, 8, 16, 32], window_size=12, image_size=384,
                     drop_path_rate=0.3, out_features=SWIN_STAGES)
DETR_SIZE = {"shortest_edge": 800, "longest_edge": 1333}


@dataclass(frozen=True)
class Architecture:
    """How to rebuild one checkpoint offline."""

    config_class: str            # a transformers configuration class
    config: dict[str, Any]       # its arguments
    model_class: str             # the task head class the guide's Auto class resolves to
    processor_class: str         # the image processor class
    processor: dict[str, Any]    # its resize / normalisation arguments
    param_count: int             # parameters() of the checkpoint, buffers excluded
    text_queries: bool = False   # OwlViT also takes text


ARCHITECTURES: dict[str, Architecture] = {
    "vit": Architecture(
        "ViTConfig", dict(num_labels=1000),
        "ViTForImageClassification",
        "ViTImageProcessor", dict(size={"height": 224, "width": 224}, image_mean=HALF, image_std=HALF),
        86_567_656),
    "beit": Architecture(
        "BeitConfig", dict(num_labels=21841, use_relative_position_bias=True,
                           use_shared_relative_position_bias=False,
                           use_absolute_position_embeddings=False, use_mean_pooling=True,
                           layer_scale_init_value=0.1),
        "BeitForImageClassification",
        "BeitImageProcessor", dict(size={"height": 224, "width": 224}, do_center_crop=False,
                                   image_mean=HALF, image_std=HALF),
        102_557_713),
    "convnext": Architecture(
        "ConvNextConfig", dict(depths=[3, 3, 27, 3], hidden_sizes=[192, 384, 768, 1536],
                               num_labels=1000),
        "ConvNextForImageClassification",
        "ConvNextImageProcessor", dict(size={"shortest_edge": 224}, crop_pct=0.875,
                                       image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD),
        197_767_336),
    "resnet": Architecture(
        "ResNetConfig", dict(depths=[3, 4, 6, 3], hidden_sizes=[256, 512, 1024, 2048],
                             layer_type="bottleneck", embedding_size=64, num_labels=1000,
                             downsample_in_first_stage=False),
        "ResNetForImageClassification",
        "ConvNextImageProcessor", dict(size={"shortest_edge": 224}, crop_pct=0.875,
                                       image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD),
        25_557_032),
    "segformer": Architecture(
        "SegformerConfig", dict(num_labels=150),  # the defaults are the b0 widths and depths
        "SegformerForSemanticSegmentation",
        "SegformerImageProcessor", dict(size={"height": 512, "width": 512},
                                        image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD),
        3_752_694),
    "mask2former": Architecture(
        "Mask2FormerConfig", dict(backbone_config=SWIN_TINY, num_labels=133),
        "Mask2FormerForUniversalSegmentation",
        "Mask2FormerImageProcessor", dict(size={"height": 384, "width": 384}, size_divisor=32,
                                          image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD),
        47_436_800),
    "maskformer": Architecture(
        "MaskFormerConfig", dict(backbone_config=SWIN_BASE_384, num_labels=150),
        "MaskFormerForInstanceSegmentation",
        "MaskFormerImageProcessor", dict(size={"shortest_edge": 640, "longest_edge": 2560},
                                         size_divisor=32, image_mean=IMAGENET_MEAN,
                                         image_std=IMAGENET_STD),
        101_831_439),
    "mobilenet": Architecture(
        "MobileNetV2Config", dict(depth_multiplier=1.0, image_size=513, output_stride=8,
                                  num_labels=21),
        "MobileNetV2ForSemanticSegmentation",
        "MobileNetV2ImageProcessor", dict(size={"shortest_edge": 513},
                                          crop_size={"height": 513, "width": 513},
                                          image_mean=HALF, image_std=HALF),
        2_525_717),
    "owlvit": Architecture(
        "OwlViTConfig", dict(),  # the defaults are owlvit-base-patch32
        "OwlViTForObjectDetection",
        "OwlViTImageProcessor", dict(size={"height": 768, "width": 768},
                                     crop_size={"height": 768, "width": 768},
                                     image_mean=CLIP_MEAN, image_std=CLIP_STD),
        153_231_879, text_queries=True),
    "detr": Architecture(
        "DetrConfig", dict(num_labels=91),  # timm ResNet-50 backbone, never downloaded
        "DetrForObjectDetection",
        "DetrImageProcessor", dict(size=DETR_SIZE, image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD),
        41_524_768),
    "detr-resnet-101": Architecture(
        "DetrConfig", dict(num_labels=91, backbone="resnet101"),
        "DetrForObjectDetection",
        "DetrImageProcessor", dict(size=DETR_SIZE, image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD),
        60_464_672),
    "conditional-detr": Architecture(
        "ConditionalDetrConfig", dict(num_labels=91),
        "ConditionalDetrForObjectDetection",
        "ConditionalDetrImageProcessor", dict(size=DETR_SIZE, image_mean=IMAGENET_MEAN,
                                              image_std=IMAGENET_STD),
        43_418_401),
}
