"""The dataset specs are found through the registry: one name per dataset, a subclass reads
another format (it inherits no spec), an unknown name lists the known ones."""
import pytest

from irtbox.datasets import SOPDataset, dataset_spec, dataset_specs
from irtbox.datasets.spec import DatasetSpec, spec_of_config
from irtbox.registry import DATASETS


@pytest.fixture
def registered():
    """Registers classes for one test; unregisters them after."""
    names = []

    def register(cls):
        DATASETS.register_module(module=cls)
        names.append(cls.__name__)
        return cls
    yield register
    for name in names:
        DATASETS.module_dict.pop(name)


def test_two_classes_declaring_one_name_is_an_error(registered):
    @registered
    class OtherSOP(SOPDataset):
        """Declares the name SOPDataset declares."""
        specs = (DatasetSpec(name='sop'), )

    with pytest.raises(ValueError, match="'sop' is declared by both SOPDataset and OtherSOP"):
        dataset_specs()


def test_a_subclass_inherits_no_spec(registered):
    @registered
    class MySOP(SOPDataset):
        """Another layout on SOPDataset's code."""

    assert [s.name for s in dataset_specs().values()].count('sop') == 1
    assert spec_of_config(dict(type='MySOP')) is None
    assert spec_of_config(dict(type='irtbox.SOPDataset', split='test')).name == 'sop'


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown dataset 'folder'; expected one of \['cars196'"):
        dataset_spec('folder', preparable=True)  # a format, nothing to prepare
    assert dataset_spec('folder').miniature is not None
