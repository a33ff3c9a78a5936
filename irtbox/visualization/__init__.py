"""Pictures of retrieval results: result grids, an HTML results browser, embedding maps.

Pure drawing functions; the CLIs are ``tools/test.py --show-dir``,
``tools/analysis_tools/browse_results.py`` and ``tools/analysis_tools/plot_embeddings.py``.
"""
from .embedding_map import embed_2d, plot_embedding_map
from .grid import COLORS, draw_result_grid, load_tile
from .html_browser import write_results_browser
from .ranking import analyze_queries, label_ground_truth, select_queries, top1_failures
from .report import show_results, write_failures_csv
from .results_file import load_results, load_revisited_gnd, relative_image_paths

__all__ = [
    'COLORS', 'draw_result_grid', 'load_tile', 'write_results_browser', 'analyze_queries',
    'label_ground_truth', 'select_queries', 'top1_failures', 'show_results',
    'write_failures_csv', 'load_results', 'load_revisited_gnd', 'relative_image_paths', 'embed_2d',
    'plot_embedding_map'
]
