"""Paulus, Xiong & Socher (2018): the ``paulus`` family."""
