"""Fast paths: private, bit-identical routes through scikit-learn estimators, under one policy."""
