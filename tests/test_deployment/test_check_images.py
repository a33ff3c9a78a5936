"""Export's check images are counted in words that agree with the count (issue 49 item 7:
"checked on 1 test images")."""
from irtbox.apis import load_run_config
from irtbox.deployment.export import load_check_images
from tests.test_reliability.reliability_helpers import TINY_CONFIG


def test_one_check_image_is_singular(in_root):
    cfg = load_run_config(TINY_CONFIG, work_dir='unused')
    assert load_check_images(cfg, 1, (32, 32))[1] == '1 test image of SOPDataset'
    assert load_check_images(cfg, 2, (32, 32))[1] == '2 test images of SOPDataset'
