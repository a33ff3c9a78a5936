"""The results browser opened from file:// in a real headless Chromium (no server)."""
import os
import shutil

import numpy as np
import pytest

from irtbox.visualization import show_results


@pytest.mark.slow
def test_browser_rows_sorting_filter_and_thumbnails(tiny_result, tmp_path, chromium):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    out = tmp_path / 'show'
    records = show_results(str(out), tiny_result['embeddings'], tiny_result['image_paths'],
                           labels=tiny_result['labels'], class_names=tiny_result['class_names'],
                           num=8, k=5, progress=False)
    page = (out / 'index.html').read_text()
    assert 'http://' not in page and 'https://' not in page and 'base64' not in page
    driver = chromium
    driver.set_window_size(1400, 2400)
    driver.get((out / 'index.html').as_uri())
    rows = driver.find_elements(By.CSS_SELECTOR, '#rows .row')
    assert len(rows) == len(records) == 8

    def shown_aps():
        return [float(r.get_attribute('data-ap')) for r in
                driver.find_elements(By.CSS_SELECTOR, '#rows .row') if r.is_displayed()]
    aps = sorted(r['ap'] for r in records)
    assert shown_aps() == [float(f'{a}') for a in aps]  # worst first by default
    Select(driver.find_element(By.ID, 'sort')).select_by_value('ap-desc')
    assert shown_aps() == [float(f'{a}') for a in aps[::-1]]

    # A failure: a wrong result (a different label) before the first correct one.
    labels = tiny_result['labels']
    failures = sorted(r['query'] for r in records
                      if labels[r['results'][0]] != labels[r['query']])
    assert 0 < len(failures) < len(records)
    driver.find_element(By.ID, 'failures-only').click()
    shown = [r for r in driver.find_elements(By.CSS_SELECTOR, '#rows .row') if r.is_displayed()]
    assert sorted(int(r.get_attribute('id')[1:]) for r in shown) == failures
    assert driver.find_element(By.ID, 'shown').text == str(len(failures))
    driver.find_element(By.ID, 'failures-only').click()
    assert len([r for r in driver.find_elements(By.CSS_SELECTOR, '#rows .row')
                if r.is_displayed()]) == 8

    # Every thumbnail loads (lazy: scrolled into view first); frames follow the labels.
    for img in driver.find_elements(By.CSS_SELECTOR, '.hit img'):
        driver.execute_script('arguments[0].scrollIntoView()', img)
    WebDriverWait(driver, 20).until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('.hit img')].every(i => i.complete && "
        "i.naturalWidth > 0)"))
    first = driver.find_element(By.CSS_SELECTOR, f"#q{records[0]['query']} .hits .hit")
    want = 'correct' if labels[records[0]['results'][0]] == labels[records[0]['query']] \
        else 'wrong'
    assert want in first.get_attribute('class').split()
    link = first.get_attribute('href')
    assert link.startswith('file://') and os.path.isfile(link[len('file://'):])
    driver.execute_script('window.scrollTo(0, 0)')
    shot = str(tmp_path / 'results_browser.png')
    driver.save_screenshot(shot)
    assert os.path.getsize(shot) > 10000
    keep = os.environ.get('IRTBOX_SCREENSHOT_DIR')  # to look at the page afterwards
    if keep:
        shutil.copy(shot, os.path.join(keep, 'results_browser.png'))
    assert np.isfinite([r['ap'] for r in records]).all()


def record(query, ap, first, results=(1, 2), status=('wrong', 'correct'), failure=True):
    return dict(query=query, results=np.array(results), scores=[0.9, 0.8][:len(results)],
                status=list(status), ap=ap, n_relevant=1, first_correct=first,
                failure=failure, confusions=[])


def test_worst_queries_order():
    from irtbox.visualization.html_browser import worst_queries
    recs = [record(0, 0.5, 2), record(3, float('nan'), None), record(4, 0.5, 5),
            record(5, 0.2, 3)]
    # No correct item at all first, then by AP; equal AP: the later first correct first.
    assert [r['query'] for r in worst_queries(recs)] == [3, 5, 4, 0]
    assert [r['query'] for r in worst_queries(recs, 2)] == [3, 5]


def test_page_rows_junk_and_relative_links(tmp_path):
    from irtbox.visualization import write_results_browser
    from PIL import Image
    paths = []
    for i in range(3):
        paths.append(str(tmp_path / 'data' / f'im {i}.png'))  # a space: links are URL-quoted
        (tmp_path / 'data').mkdir(exist_ok=True)
        Image.new('RGB', (10, 10)).save(paths[-1])
    out = tmp_path / 'show'
    write_results_browser(str(out), [record(0, float('nan'), None, status=('junk', 'wrong'))],
                          paths, labels=np.array([0, 0, 1]), class_names=['a', 'b'],
                          progress=False)
    page = (out / 'index.html').read_text()
    assert 'class="hit junk" href="../data/im%201.png"' in page
    assert 'data-ap=""' in page and 'AP n/a (no correct item)' in page
    assert page.count('loading="lazy"') == 3
    assert sorted(p.name for p in (out / 'thumbs').iterdir()) == ['0.jpg', '1.jpg', '2.jpg']
