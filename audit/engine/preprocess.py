"""What a protocol does to a data set's rows before the split (``[data] preprocess``).

- ``none``: the rows as loaded.
- ``alpbench-code``: what ALPBench 0.1.2's ``ActiveLearningScenario`` does to an OpenML
  table: every column ordinal-encoded (numeric ones too: a value becomes its rank among
  the column's distinct values), missing values mean-imputed, and duplicate feature rows
  dropped, the first of each kept, the rows left in lexicographic order of their features
  (numpy's ``unique`` over rows), which is the order the split then sees.
- ``alpbench-paper``: what the paper says (A.4): categorical columns one-hot encoded,
  missing values imputed by mean or mode. A LIBSVM file has numeric columns only and no
  missing values, so on the files al-audit reads this leaves the rows as they are.

Both ALPBench methods read an OpenML table: a shared file standing in for one first loses
the columns the table does not have (alpbench_datasets.toml, ``drop_features``).
"""
from __future__ import annotations

import numpy as np

from audit.engine.openml_data import as_table_columns

PREPROCESSING = ("none", "alpbench-code", "alpbench-paper")


def prepare(method: str, X: np.ndarray, y: np.ndarray, dataset: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of the file ``dataset`` after the protocol's preprocessing ``method``."""
    if method not in PREPROCESSING:
        raise ValueError(f"unknown preprocessing {method!r}; known: {', '.join(PREPROCESSING)}")
    if method == "none":
        return X, y
    if dataset is not None:
        X = as_table_columns(dataset, X)
    if method == "alpbench-paper":
        return X, y
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import OrdinalEncoder

    encoded = OrdinalEncoder().fit_transform(X)
    encoded = SimpleImputer(missing_values=np.nan, strategy="mean").fit_transform(encoded)
    _, first = np.unique(encoded, axis=0, return_index=True)
    return encoded[first], np.asarray(y)[first]
