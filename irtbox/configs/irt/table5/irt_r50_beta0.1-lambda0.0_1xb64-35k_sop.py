# IRT Table 5 (paper SOP R@1: 78.9): ResNet-50 on SOP, margin β = 0.1, λ = 0
# (no KoLeo term, i.e. IRT_L).
_base_ = ['../irt-l_r50_1xb64-35k_sop.py']

model = dict(head=dict(losses=dict(contrastive=dict(margin=0.1))))

# Fig. 4: γ, the gradient noise of L_contr averaged over training, goes to
# <work_dir>/gradient_noise.json (plot: tools/analysis_tools/plot_gradient_noise.py).
custom_hooks = [dict(type='GradientNoiseHook', loss_name='contrastive', interval=1)]
