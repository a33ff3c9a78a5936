from .bf16_autocast import BF16AutocastOptimWrapper, bf16_autocast_available, bf16_inference

__all__ = ['BF16AutocastOptimWrapper', 'bf16_autocast_available', 'bf16_inference']
