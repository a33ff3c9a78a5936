# IRT Table 5 (paper SOP R@1: 83.5): DeiT-S on SOP, margin β = 0.5, KoLeo weight λ = 0.3.
_base_ = ['../irt-r_deit-s_1xb64-35k_sop.py']

model = dict(
    head=dict(losses=dict(contrastive=dict(margin=0.5)), loss_weights=dict(koleo=0.3)))

# Fig. 4: γ, the gradient noise of L_contr averaged over training, goes to
# <work_dir>/gradient_noise.json (plot: tools/analysis_tools/plot_gradient_noise.py).
custom_hooks = [dict(type='GradientNoiseHook', loss_name='contrastive', interval=1)]
