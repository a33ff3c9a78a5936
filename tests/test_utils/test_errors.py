"""irtbox.utils.errors: messages that name arguments, read as Python or as the command's options."""
from irtbox.cli import option_of, worded
from irtbox.utils.errors import ArgumentError, word_fields


def test_fields_read_as_arguments_or_as_options():
    text = 'pass it as {from_dir}; {max_index_memory} 4G; a path {not a field} and {Upper} stay'
    assert word_fields(text) == ('pass it as from_dir; max_index_memory 4G; a path '
                                 '{not a field} and {Upper} stay')
    assert word_fields(text, option_of) == ('pass it as --from-dir; --max-index-memory 4G; a '
                                            'path {not a field} and {Upper} stay')
    assert option_of('k', {'k': '-k'}) == '-k'


def test_an_argument_error_carries_its_value_and_words_its_fields():
    error = ArgumentError('{opset} 9: below 11', 'opset', 9)
    assert (str(error), error.argument, error.value) == ('opset 9: below 11', 'opset', 9)
    assert worded(error) == '--opset 9: below 11'
    assert worded(ValueError('{opset} stays')) == '{opset} stays'  # only irtbox's typed errors
