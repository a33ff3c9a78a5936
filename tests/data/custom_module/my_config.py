_base_ = ['../configs/tiny_irt.py']
custom_imports = dict(imports=['my_pool'], allow_failed_imports=False)
model = dict(neck=[dict(type='TopKPool', k=2)])
