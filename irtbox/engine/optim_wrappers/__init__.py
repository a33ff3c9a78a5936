from .bf16_autocast import BF16AutocastOptimWrapper, bf16_autocast_available

__all__ = ['BF16AutocastOptimWrapper', 'bf16_autocast_available']
