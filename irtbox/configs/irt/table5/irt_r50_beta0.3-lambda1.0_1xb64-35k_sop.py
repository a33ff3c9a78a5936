# IRT Table 5 (paper SOP R@1: 81.7): ResNet-50 on SOP, margin β = 0.3, KoLeo weight λ = 1.0.
_base_ = ['../irt-r_r50_1xb64-35k_sop.py']

model = dict(
    head=dict(losses=dict(contrastive=dict(margin=0.3)), loss_weights=dict(koleo=1.0)))

# Fig. 4: γ, the gradient noise of L_contr averaged over training, goes to
# <work_dir>/gradient_noise.json (plot: tools/analysis_tools/plot_gradient_noise.py).
custom_hooks = [dict(type='GradientNoiseHook', loss_name='contrastive', interval=1)]
