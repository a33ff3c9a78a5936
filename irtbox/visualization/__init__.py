"""Pictures of retrieval results: result grids, an HTML results browser, embedding maps.

Drawing functions, and the figures made from saved results (the embeddings file a test
writes, training work dirs).
"""
from .descriptor_analysis import analyze_embedding_set, analyze_result_files
from .embedding_map import embed_2d, plot_embedding_map
from .gradient_noise import plot_gradient_noise
from .grid import COLORS, draw_result_grid, load_tile
from .html_browser import write_results_browser
from .ranking import analyze_queries, label_ground_truth, select_queries, top1_failures
from .report import show_results, write_failures_csv
from .results_file import (browse_results, load_result_set, load_revisited_gnd,
                           plot_results_map)

__all__ = [
    'COLORS', 'draw_result_grid', 'load_tile', 'write_results_browser', 'analyze_queries',
    'label_ground_truth', 'select_queries', 'top1_failures', 'show_results',
    'write_failures_csv', 'browse_results', 'load_result_set', 'load_revisited_gnd',
    'plot_results_map', 'embed_2d', 'plot_embedding_map', 'analyze_embedding_set',
    'analyze_result_files', 'plot_gradient_noise'
]
