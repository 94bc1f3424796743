"""scalebench: how well does distributed training scale on this cluster, and did it regress?"""

__version__ = "0.1.0"
