"""What a trained model learned about positions, from its weights and attention (rpr-nmt-inspect).

    statistics.py  the numbers: Shaw's tables, T5's biases, the learned table, ALiBi's slopes, and
                   the self-attention mass by relative distance over a dev set
    figures.py     their PNG figures, inspect.json and index.md

It reads models and writes figures; it exports nothing (deployment is rpr_nmt/export).
"""
