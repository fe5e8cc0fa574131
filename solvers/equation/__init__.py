"""The equation: a layer's weights, the controls theta(t) that switch them on in time, the
operators (attention, feed-forward, layer-norm projections), the flow's field u_t = f(t, u)
built from them, the problem (initial data, horizon, norm placement, masks) and the
solutions known in closed form (exact linear layers, manufactured solutions). Nothing here
steps in time: the methods and the reference do (docs/model.md)."""
