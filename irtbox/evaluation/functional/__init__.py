"""Pure retrieval metrics and embedding analyses on arrays/tensors, usable without any runner."""
from .average_precision import average_precision, search_average_precision
from .embedding_analysis import (cumulative_energy, effective_dimension, ground_truth_histograms,
                                 similarity_histograms)
from .gradient_noise import gradient_direction_spread
from .knn import knn
from .map_at_r import count_relevant, map_at_r_from_relevance
from .recall import recall_from_relevance
from .diffusion import diffusion_rerank
from .k_reciprocal import k_reciprocal_rerank
from .neighbour_graph import (NeighbourGraph, load_neighbour_graph, neighbour_graph,
                              save_neighbour_graph)
from .reranking import alpha_database_augmentation, alpha_query_expansion
from .rerankers import RERANKERS, rerank, rerank_graph, rerank_search
from .retrieval import map_at_r, recall_at_k, retrieval_metrics
from .revisited import (build_revisited_gnd, rank_database, revisited_map, revisited_means,
                        revisited_metrics)
from .superglobal import superglobal_rerank
from .whitening import apply_whitening, learn_whitening, pca_whitening

__all__ = [
    'knn', 'recall_at_k', 'recall_from_relevance', 'map_at_r', 'map_at_r_from_relevance',
    'count_relevant', 'retrieval_metrics', 'revisited_map', 'revisited_means',
    'build_revisited_gnd', 'rank_database', 'revisited_metrics', 'learn_whitening',
    'apply_whitening', 'pca_whitening',
    'alpha_query_expansion', 'alpha_database_augmentation', 'average_precision',
    'k_reciprocal_rerank', 'diffusion_rerank', 'superglobal_rerank', 'RERANKERS', 'rerank',
    'rerank_graph', 'rerank_search', 'NeighbourGraph', 'neighbour_graph', 'save_neighbour_graph',
    'load_neighbour_graph',
    'search_average_precision',
    'cumulative_energy', 'effective_dimension', 'similarity_histograms',
    'gradient_direction_spread', 'ground_truth_histograms'
]
