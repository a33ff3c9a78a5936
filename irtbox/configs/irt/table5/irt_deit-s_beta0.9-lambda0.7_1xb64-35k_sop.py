# IRT Table 5 (paper SOP R@1: 71.2): DeiT-S on SOP, margin β = 0.9, KoLeo weight λ = 0.7.
_base_ = ['../irt-r_deit-s_1xb64-35k_sop.py']

model = dict(
    head=dict(losses=dict(contrastive=dict(margin=0.9)), loss_weights=dict(koleo=0.7)))

# Fig. 4: γ, the gradient noise of L_contr averaged over training, goes to
# <work_dir>/gradient_noise.json (plot: tools/analysis_tools/plot_gradient_noise.py).
custom_hooks = [dict(type='GradientNoiseHook', loss_name='contrastive', interval=1)]
