"""Precision on 20 real trees (issue 12): shapes that were default-set findings and are not risks.

Each negative is cut down from a finding read in context on transformers, diffusers, timm,
torch, jax, keras, tensorflow-probability, tensorflow-addons, tensorflow/examples, keras-hub
or fairseq, and judged harmless (the hazard cannot happen for the inputs the code accepts,
or the code is never differentiated) or false (the rule misread the code). Each positive
keeps the risk, so that a negative is not silent by accident.
"""

from __future__ import annotations

import textwrap

import pytest

from nanguard.lint import lint_source

HEADER = ("import math\nfrom typing import Optional\nimport numpy as np\nimport pandas as pd\nimport torch\nimport torch.nn as nn\n"
          "import torch.nn.functional as F\nimport tensorflow as tf\nimport jax\nimport jax.numpy as jnp\n")


def _codes(body: str, confidence: str = "certain") -> list[str]:
    return [f.code for f in lint_source(HEADER + textwrap.dedent(body), confidence=confidence)]


# RepDistiller's PKT loss, with the ratio whose log it takes left open.
PKT_LOSS = """\
    def cosine_similarity_loss(output_net, target_net, eps=0.0000001):
        model_similarity = torch.mm(output_net, output_net.transpose(0, 1))
        target_similarity = torch.mm(target_net, target_net.transpose(0, 1))
        model_similarity = (model_similarity + 1.0) / 2.0
        target_similarity = (target_similarity + 1.0) / 2.0
        model_similarity = model_similarity / torch.sum(model_similarity, dim=1, keepdim=True)
        target_similarity = target_similarity / torch.sum(target_similarity, dim=1, keepdim=True)
        return torch.mean(target_similarity * torch.log({ratio}))
"""

# Pairs of a harmless shape (NEGATIVES) and the risky one next to it (POSITIVES), written once.
PER_BATCH_MASKS = """\
    def contrast(batch, other_ids, view1_feat, view2_feat):
        pos_sim = 0
        for batch_id in batch.unique():
            batch_mask = batch == batch_id
            sim = torch.mm(view1_feat[batch_mask], view2_feat[batch_mask].T)
            pos_sim += torch.diagonal(sim).mean() / batch_mask.sum()
        return pos_sim
"""
SAMPLES_PER_ENV = """\
    def importance(buffers, other_ids, num_steps):
        environment_ids = buffers["environment_ids"].view(-1)
        unique_envs = torch.unique(environment_ids, sorted=False)
        samples_per_env = (environment_ids.view(1, -1) == unique_envs.view(-1, 1)).float().sum(-1)
        return (num_steps + 1) / samples_per_env
"""
MEAN_STD = """\
    def compute_mean_std(states: {annotation}, eps: float):
        mean = states.mean(0)
        std = states.std(0) + eps
        return mean, std
"""
BOUND_RATE = """\
    def bound_rate(mc_returns, q_values, targets, n):
        lower_bounds = mc_returns.reshape(-1, 1).repeat(1, n)
        num_vals = torch.sum(lower_bounds == lower_bounds)
        return torch.sum(q_values < lower_bounds) / num_vals
"""
STORED_STEPS = """\
    def td_loss(batch, chosen_action_qvals, targets):
        terminated = batch["terminated"][:, :-1].float()
        mask = batch["filled"][:, :-1].float()
        mask[:, 1:] = mask[:, 1:] * (1 - terminated[:, :-1])
        td_error = chosen_action_qvals - targets.detach()
        mask = mask.expand_as(td_error)
        masked_td_error = td_error * mask
        return (masked_td_error ** 2).sum() / mask.sum()
"""
EVA_BLOCKS = """\
    class Attention(nn.Module):
        def forward(self, x, rel_pos_bias=None, attn_mask=None):
            attn = x @ x.transpose(-2, -1)
            if attn_mask is not None:
                attn_mask = attn_mask.bool()
                attn = attn.masked_fill(~attn_mask[:, None, None, :], float("-inf"))
            attn = attn.softmax(dim=-1)
            return attn @ x

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Attention()

        def forward(self, x, rel_pos_bias=None, attn_mask=None):
            return x + self.attn(x, rel_pos_bias=rel_pos_bias, attn_mask=attn_mask)

    class Model(nn.Module):
        def __init__(self, depth):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for i in range(depth)])

        def forward(self, x, pad_mask=None):
            for blk in self.blocks:
                x = blk(x, rel_pos_bias=None)
            return x
"""
DETR_SEGMENTATION = """\
    class MHAttentionMap(nn.Module):
        def forward(self, q, k, mask=None):
            weights = torch.einsum("bqnc,bnchw->bqnhw", q, k)
            if mask is not None:
                weights.masked_fill_(mask.unsqueeze(1).unsqueeze(1), float("-inf"))
            return F.softmax(weights.flatten(2), dim=-1).view(weights.size())

    class DETRsegm(nn.Module):
        def __init__(self, detr):
            super().__init__()
            self.detr = detr
            self.bbox_attention = MHAttentionMap()

        def forward(self, samples):
            features, pos = self.detr.backbone(samples)
            src, mask = features[-1].decompose()
            hs, memory = self.detr.transformer(src, mask)
            return self.bbox_attention(hs[-1], memory, mask=mask)
"""
LOCAL_CONSTRAINT = """\
    class GeneralizedAttention(nn.Module):
        def __init__(self, spatial_range=-1, kv_stride=1, max_len=42):
            super().__init__()
            self.spatial_range = spatial_range
            max_len_kv = int((max_len - 1.0) / kv_stride + 1)
            local_constraint_map = np.ones((max_len, max_len, max_len_kv, max_len_kv), dtype=np.int64)
            for iy in range(max_len):
                for ix in range(max_len):
                    local_constraint_map[
                        iy, ix,
                        max((iy - spatial_range) // kv_stride, 0):min((iy + spatial_range + 1) // kv_stride + 1, max_len),
                        max((ix - spatial_range) // kv_stride, 0):min((ix + spatial_range + 1) // kv_stride + 1, max_len)] = 0
            self.local_constraint_map = nn.Parameter(torch.from_numpy(local_constraint_map).byte(), requires_grad=False)

        def forward(self, energy, h, w, h_kv, w_kv):
            m = self.local_constraint_map[:h, :w, :h_kv, :w_kv].contiguous().view(1, 1, h * w, h_kv * w_kv)
            energy = energy.masked_fill_(m, float('-inf'))
            return F.softmax(energy, 3)
"""
ANCHOR_WEIGHTS = """\
    def anchor_weights(labels, positive_weight, n):
        bbox_outside_weights = np.zeros((n, 4), dtype=np.float32)
        positive_weights = positive_weight / np.sum(labels == 1)
        negative_weights = (1.0 - positive_weight) / np.sum(labels == 0)
        bbox_outside_weights[labels == 1, :] = positive_weights
        bbox_outside_weights[labels == 0, :] = negative_weights
        return bbox_outside_weights
"""
GT_EDGES = """\
    def aspect_ratio(gt_rbboxes):
        pt1, pt2, pt3, pt4 = gt_rbboxes[..., :8].chunk(4, 1)
        edge1 = torch.sqrt(torch.pow(pt1[..., 0] - pt2[..., 0], 2) + torch.pow(pt1[..., 1] - pt2[..., 1], 2))
        edge2 = torch.sqrt(torch.pow(pt2[..., 0] - pt3[..., 0], 2) + torch.pow(pt2[..., 1] - pt3[..., 1], 2))
        return torch.max(edge1, edge2) / torch.min(edge1, edge2).clamp(min=1e-6)
"""
GT_GAUSSIAN = """\
    def gaussian_of(target):
        edge_1 = target[:, 1, :] - target[:, 0, :]
        w = (edge_1 * edge_1).sum(dim=-1, keepdim=True)
        w_ = w.sqrt()
        return edge_1 / w_.clamp(min=1e-6)
"""
CORNER_FOCAL = """\
    def neg_loss(pred, gt):
        pos_inds = gt.eq(1)
        neg_inds = gt.lt(1)
        pos_pred = pred[pos_inds]
        neg_pred = pred[neg_inds]
        pos_loss = (torch.log(pos_pred) * torch.pow(1 - pos_pred, 2)).sum()
        neg_loss = (torch.log(1 - neg_pred) * torch.pow(neg_pred, 2)).sum()
        num_pos = pos_inds.float().sum()
        if pos_pred.nelement() == 0:
            return -neg_loss
        return -(pos_loss + neg_loss) / num_pos
"""
KEYPOINT_MATCH = """\
    def match(pred_score, dist, threshold):
        mask = (pred_score > threshold).float()
        if mask.sum() < 2:
            return torch.zeros(dist.shape[0])
        return torch.sum(dist <= 1, dim=1) / mask.sum()
"""
JACCARD = """\
    def jaccard(fg_mask, gt_mask):
        if gt_mask.sum() == 0 and fg_mask.sum() == 0:
            return 1
        return (gt_mask & fg_mask).sum() / (gt_mask | fg_mask).sum().float()
"""
JACCARD_NP = """\
    def jaccard(fg_mask, gt_mask):
        gt_mask = gt_mask.astype(bool)
        fg_mask = fg_mask.astype(bool)
        if np.isclose(np.sum(gt_mask), 0) and np.isclose(np.sum(fg_mask), 0):
            return 1
        return np.sum(gt_mask & fg_mask) / np.sum(gt_mask | fg_mask, dtype=np.float32)
"""
DSR_DISTANCE = """\
    def dsr(array1, array2, M, scores, dist):
        for i in range(len(array1)):
            q = torch.FloatTensor(array1[i])
            g = torch.FloatTensor(array2[i])
            proj = torch.from_numpy(M[i])
            a = torch.matmul(g, torch.matmul(proj, q)) - q
            dist[i] = ((torch.pow(a, 2).sum(0).sqrt()) * scores[i]).sum()
        return dist
"""
ANCHOR_LOOP = """\
    def assign_anchor_to_bbox(ground_truth, anchors, jaccard):
        num_anchors, num_gt_boxes = anchors.shape[0], ground_truth.shape[0]
        anchors_bbox_map = torch.full((num_anchors,), -1, dtype=torch.long)
        for _ in range(num_gt_boxes):
            max_idx = torch.argmax(jaccard)
            box_idx = (max_idx % num_gt_boxes).long()
            anc_idx = (max_idx / num_gt_boxes).long()
            anchors_bbox_map[anc_idx] = box_idx
        return anchors_bbox_map
"""
RANGE_TEXTURE = """\
    def texture(size: int):
        t = jnp.array([[jnp.sqrt((x - size) ** 2 + (y - size) ** 2) for y in range(2 * size)] for x in range(2 * size)])
        return t / t.max()
"""
NEAREST_MATCH = """\
    def assign_candidates(det_centers, gt_centers, threshold):
        cand2gt = torch.zeros(det_centers.shape[0])
        dist = torch.sqrt(torch.sum((det_centers[:, None] - gt_centers[None]) ** 2, dim=-1))
        min_dist, min_gt = torch.min(dist, dim=-1)
        cand2gt = min_gt.float()
        cand2gt[min_dist > threshold] = -1.0
        return cand2gt
"""
HVU_LOSS = """\
    def category_losses(category_loss, category_mask, idx):
        category_mask_i = category_mask[:, idx].reshape(-1)
        if torch.sum(category_mask_i) < 0.5:
            return torch.tensor(0.0)
        category_loss = torch.sum(category_loss * category_mask_i)
        return category_loss / torch.sum(category_mask_i)
"""
LOG_SUM_EXP = """\
    def log_sum_exp(tensor, dim):
        m, _ = torch.max(tensor, dim)
        m_expanded = m.unsqueeze(dim).expand_as(tensor)
        return m + torch.log(torch.sum(torch.exp(tensor - m_expanded), dim))
"""
BOX_VOTING = """\
    def box_voting(iou_, scores, iou_thresh):
        match_indicator = tf.cast(tf.greater(iou_, iou_thresh), dtype=tf.float32)
        num_matches = tf.reduce_sum(match_indicator, 1)
        match_assert = tf.Assert(tf.reduce_all(tf.greater(num_matches, 0)), ['no match'])
        with tf.control_dependencies([match_assert]):
            sum_scores = tf.matmul(match_indicator, scores)
        return tf.reshape(sum_scores, [-1]) / num_matches
"""
CLIP_RATIOS = """\
    def log_clip_ratios(low, high, mask, accelerator, metrics):
        def masked_seq_mean(x):
            return (x * mask).sum(-1) / mask.sum(-1)
        gathered_low = accelerator.gather(masked_seq_mean(low.float()))
        metrics["low_min"].append(nanmin(gathered_low).item())
        metrics["high_max"].append(torch.nanmax(masked_seq_mean(high.float())).item())
"""
SALINA_EPISODES = """\
    def bc_loss(done, target_action, action, T, batch_size):
        length = done.float().argmax(0)
        mask = torch.arange(T).unsqueeze(-1).repeat(1, batch_size).to(length.device)
        length = length.unsqueeze(0).repeat(T, 1)
        mask = mask.le(length).float()
        mse = (target_action - action) ** 2
        return (mse.sum(2) * mask).sum() / mask.sum()
"""
FLIPPED_BUFFER = """\
    class RelativeAttention(nn.Module):
        def __init__(self, window):
            super().__init__()
            self.register_buffer("mask", torch.tril(torch.ones(window, window), diagonal=-1))
            self.register_buffer("flipped_mask", torch.flip(self.mask, (-1,)))

        def forward(self, qk):
            qk = qk.masked_fill(self.flipped_mask == 1, float("-inf"))
            return F.softmax(qk, dim=-1)
"""


# OpenNMT's alignment scores: attention restricted to the valid source positions, named
# `valid_alignment`; a quantity called after the positions it keeps, not a mask.
ALIGNMENT_SCORES = """\
    def build_align_pharaoh(valid_alignment):
        if isinstance(valid_alignment, torch.Tensor):
            return torch.divide(valid_alignment.max(dim=-1).values, valid_alignment.sum(dim=-1))
"""


# LLMs-from-scratch: a KV cache slices its causal buffer one way with a cache and another
# without; both keep key 0 in every row.
KV_CACHE_MASK = """\
    class MultiHeadAttention(nn.Module):
        def __init__(self, context_length):
            super().__init__()
            self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
            self.ptr = 0

        def forward(self, queries, keys, use_cache=False):
            attn_scores = queries @ keys.transpose(2, 3)
            num_q, num_k = queries.shape[-2], keys.shape[-2]
            if use_cache:
                mask_bool = self.mask.bool()[self.ptr:self.ptr + num_q, :num_k]
                self.ptr += num_q
            else:
                mask_bool = self.mask.bool()[:num_q, :num_k]
            attn_scores.masked_fill_(mask_bool, -torch.inf)
            return torch.softmax(attn_scores, dim=-1)
"""

# ... a decoder's attention takes the mask its block passes on, which the model builds once.
PASSED_CAUSAL_MASK = """\
    class Attention(nn.Module):
        def forward(self, x, mask, cos):
            scores = x @ x.transpose(2, 3)
            scores = scores.masked_fill(mask[:x.shape[1], :x.shape[1]], -torch.inf)
            return torch.softmax(scores, dim=-1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.att = Attention()

        def forward(self, x, mask, cos):
            return x + self.att(x, mask, cos)

    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(n)])

        def forward(self, x):
            n = x.shape[1]
            mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
            mask = mask[None, None, :, :]
            for i, block in enumerate(self.blocks):
                x = block(x, mask, 0)
            return x
"""

# ... and query positions from a cache pointer against keys from 0.
POSITION_MASK = """\
    def attend(queries, keys, ptr, use_cache):
        scores = queries @ keys.transpose(2, 3)
        if use_cache:
            q_positions = torch.arange(ptr, ptr + queries.shape[-2])
        else:
            q_positions = torch.arange(queries.shape[-2])
        k_positions = torch.arange(keys.shape[-2])
        mask = q_positions.unsqueeze(-1) < k_positions.unsqueeze(0)
        scores = scores.masked_fill(mask, -torch.inf)
        return torch.softmax(scores, dim=-1)
"""


# cleverhans' L1 fast gradient method: the entries tied for the row's maximum, which the
# maximum always is.
TIED_FOR_MAX = """\
    def l1_step(grad, red_ind):
        abs_grad = tf.abs(grad)
        max_abs_grad = tf.reduce_max(abs_grad, red_ind, keepdims=True)
        tied_for_max = tf.to_float(tf.equal(abs_grad, max_abs_grad))
        num_ties = tf.reduce_sum(tied_for_max, red_ind, keepdims=True)
        return tf.sign(grad) * tied_for_max / num_ties
"""

# adversarial-robustness-toolbox's PGD: the attack normalises the estimator's loss gradient,
# which nothing differentiates again.
ATTACK_STEP = """\
    class PGD:
        def _compute_perturbation(self, x, y):
            grad = self.estimator.loss_gradient(x=x, y=y) * (-1 if self.targeted else 1)
            grad_2d = grad.reshape(len(grad), -1)
            norm1 = torch.linalg.norm(grad_2d, ord=1, dim=1, keepdim=True)
            return grad_2d * norm1.where(norm1 == 0, 1 / norm1)
"""


# Transformers4Rec's recall: the relevant counts of the rows that have some.
NONZERO_COUNTS = """\
    def recall(labels, topk_labels, recalls):
        num_relevant = torch.sum(labels, dim=-1)
        rel_indices = (num_relevant != 0).nonzero().squeeze(dim=1)
        rel_count = num_relevant[rel_indices]
        recalls[rel_indices] = torch.div(torch.sum(topk_labels[rel_indices], dim=-1), rel_count)
"""


# Read this round on fresh trees (DI-engine, deepchem, InternVL, mmagic, mmhuman3d, ALBEF-style
# retrieval), each a false finding there; the POSITIVES keep the risk next to it.
NUMPY_DISTANCE = """\
    def get_features(obs):
        def get_distance(xy1, xy2):
            return (((xy1 - xy2) ** 2).sum(axis=-1)) ** 0.5

        both_team = np.array(obs["left_team"] + obs["right_team"], dtype=np.float32)
        ball = np.array([obs["ball"][:2]], dtype=np.float32)
        return get_distance(both_team[:, np.newaxis, :], ball[np.newaxis, :, :])
"""
PPO_ENTROPY = """\
    def ppo_loss(outputs):
        prob = outputs[0]
        machine_eps = np.finfo(np.float32).eps
        prob += machine_eps
        return -tf.reduce_mean(tf.reduce_sum(prob * tf.math.log(prob), axis=1))
"""
SCALED_SCORES = """\
    def attention(query, key, mask=None, inf=1e12):
        d_k = query.size(-1)
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
        if mask is not None:
            scores = scores.masked_fill(
                mask.unsqueeze(1).repeat(1, query.shape[1], query.shape[2], 1) == 0, -inf)
        return F.softmax(scores, dim=-1)
"""
ACTIVE_RATIO = """\
    def check_valid(sample, min_active_tokens_ratio=1 / 256):
        num_ignore_tokens = (sample["labels"] == -100).sum()
        num_tokens = sample["labels"].numel()
        return (1 - num_ignore_tokens / num_tokens) > min_active_tokens_ratio
"""
AUGMENT_PIPE = """\
    class AugmentPipe(nn.Module):
        def __init__(self, scale=0.0, scale_std=0.2):
            super().__init__()
            self.scale = float(scale)
            self.scale_std = float(scale_std)
            self.p = 0.5

        def forward(self, images):
            batch_size = images.shape[0]
            s = torch.exp(torch.randn([batch_size]) * self.scale_std * math.log(2))
            s = torch.where(torch.rand([batch_size]) < self.scale * self.p, s, torch.ones_like(s))
            return images * s[:, None, None, None]
"""
NOISE_WEIGHT = """\
    class SinGAN(nn.Module):
        def update_noise(self, g_recon):
            mse = F.mse_loss(g_recon, self.reals[self.curr_stage + 1])
            rmse = torch.sqrt(mse)
            self.noise_weights.append(self.noise_weight_init * rmse.item())
"""
GATHERED_IDS = """\
    def itc_targets(image_ids, sim_t2i):
        image_ids = image_ids.view(-1, 1)
        image_ids_all = GatherLayer.apply(image_ids).flatten(0, 1)
        pos_idx = torch.eq(image_ids, image_ids_all.t()).float()
        sim_targets = pos_idx / pos_idx.sum(1, keepdim=True)
        return -torch.sum(F.log_softmax(sim_t2i, dim=1) * sim_targets, dim=1).mean()
"""
NORMAL_VISIBILITY = """\
    def vis_normals(coords, normals):
        mask = coords[:, :, 2] > 0
        coords_masked = -coords[mask]
        coords_len = torch.sqrt(torch.sum(coords_masked ** 2, dim=1))
        return torch.sum(coords_masked * normals[mask], dim=1) / coords_len
"""


SESSION_CONTEXT = """\
    def jrc_loss(labels, session_ids, l_pos):
        mask = tf.equal(tf.expand_dims(session_ids, 1), tf.expand_dims(session_ids, 0))
        mask = tf.cast(mask, tf.float32)
        loss_pos = -tf.reduce_sum(labels * tf.nn.log_softmax(l_pos, axis=0), axis=0)
        return tf.reduce_mean(loss_pos / tf.reduce_sum(mask, axis=0))
"""
CLIPPED_LOG_LOSS = """\
    def log_loss(y_true, y_pred, eps=1e-15):
        y_pred = np.clip(y_pred.astype(float), eps, 1 - eps)
        return -(y_true * np.log(y_pred) + (1 - y_true) * np.log(1 - y_pred)).mean()
"""
BOUNDED_LOG_LOSS = """\
    def calculate_loss(solution, prediction, eps=1e-15):
        prediction = np.minimum(1 - eps, np.maximum(eps, prediction))
        pos = -np.mean(solution * np.log(prediction), axis=0)
        return pos - np.mean((1 - solution) * np.log(1 - prediction), axis=0)
"""
ADAPTIVE_FM = """\
    def cal_adaptive_fm(pred, gt, beta=0.3):
        binary_prediction = pred >= 0.5
        area_intersection = binary_prediction[gt].sum()
        if area_intersection == 0:
            adaptive_fm = 0
        else:
            pre = area_intersection / np.count_nonzero(binary_prediction)
            rec = area_intersection / np.count_nonzero(gt)
            adaptive_fm = (1 + beta) * pre * rec / (beta * pre + rec)
        return adaptive_fm
"""

BOND_ANGLE = """\
    def get_angle(pos, angle_index):
        n1, ctr, n2 = angle_index
        v1 = pos[n1] - pos[ctr]
        v2 = pos[n2] - pos[ctr]
        inner_prod = torch.sum(v1 * v2, dim=-1, keepdim=True)
        length_prod = torch.norm(v1, dim=-1, keepdim=True) * torch.norm(v2, dim=-1, keepdim=True)
        return torch.acos(inner_prod / length_prod)
"""
HERMITE_START = """\
    def initial_nodes(n, x_initial):
        mu = np.sqrt(2.0 * n + 1.0)
        t = x_initial / mu
        return np.arccos(t)
"""

TOXICITY_SCORES = """\
    def evaluate(toxicity_scores, num_toxic):
        toxicity_scores = np.array(toxicity_scores)
        toxicity_scores[toxicity_scores < 0] = np.nan
        if np.isnan(toxicity_scores).all():
            raise ValueError("All predictions are not valid")
        length = np.count_nonzero(~np.isnan(toxicity_scores))
        return round(num_toxic / length, 4)
"""

EGNN_LAYERS = """\
    class GCL_basic(nn.Module):
        def forward(self, x, edge_index, edge_attr=None):
            row, col = edge_index
            return self.edge_model(x[row], x[col], edge_attr)

    class GCL_rf(GCL_basic):
        def edge_model(self, source, target, edge_attr):
            x_diff = source - target
            radial = torch.sqrt(torch.sum(x_diff ** 2, dim=1)).unsqueeze(1)
            return self.phi(torch.cat([radial, edge_attr], dim=1))

    class E_GCL(nn.Module):
        def coord2radial(self, edge_index, coord):
            row, col = edge_index
            coord_diff = coord[row] - coord[col]
            radial = torch.sum(coord_diff ** 2, 1).unsqueeze(1)
            norm = torch.sqrt(radial) + 1
            coord_diff = coord_diff / norm
            return radial, coord_diff
"""

REWARD_CRITERION = """\
    def reward_loss(input, seq, reward):
        input = input.gather(2, seq.unsqueeze(2)).squeeze(2).reshape(-1)
        mask = (seq > 0).to(input)
        mask = torch.cat([mask.new(mask.size(0), 1).fill_(1), mask[:, :-1]], 1).reshape(-1)
        output = -input * reward.reshape(-1) * mask
        return torch.sum(output) / torch.sum(mask)
"""

BATCH_POSITIONS = """\
    class MXMNet(nn.Module):
        def forward(self, pyg_batch):
            pos = pyg_batch.pos
            j_l, i_l = remove_self_loops(pyg_batch.edge_index)[0]
            dist_l = (pos[i_l] - pos[j_l]).pow(2).sum(dim=-1).sqrt()
            return self.rbf(dist_l)
"""

DEPTH_METRICS = """\
    def compute_depth_metrics(gt, pred):
        diff = gt - pred
        rmse = torch.sqrt(torch.mean(diff ** 2))
        rmse_log = torch.sqrt(torch.mean((torch.log(gt) - torch.log(pred)) ** 2))
        return rmse, rmse_log
"""

VIT_MASKED_ATTENTION = """\
    class Residual(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x, **kwargs):
            return self.fn(x, **kwargs) + x


    class Attention(nn.Module):
        def __init__(self, dim, heads=8):
            super().__init__()
            self.heads = heads
            self.scale = dim ** -0.5
            self.to_qkv = nn.Linear(dim, dim * 3, bias=False)

        def forward(self, x, mask=None):
            q, k, v = self.to_qkv(x).chunk(3, dim=-1)
            dots = torch.einsum('bid,bjd->bij', q, k) * self.scale
            if mask is not None:
                mask = F.pad(mask.flatten(1), (1, 0), value=True)
                mask = mask[:, None, :] * mask[:, :, None]
                dots.masked_fill_(~mask, float('-inf'))
            attn = dots.softmax(dim=-1)
            return torch.einsum('bij,bjd->bid', attn, v)


    class Transformer(nn.Module):
        def __init__(self, dim, depth):
            super().__init__()
            self.layers = nn.ModuleList([])
            for _ in range(depth):
                self.layers.append(nn.ModuleList([Residual(Attention(dim)), Residual(nn.Linear(dim, dim))]))

        def forward(self, x, mask=None):
            for attn, ff in self.layers:
                x = attn(x, mask=mask)
                x = ff(x)
            return x


    class SeqTransformer(nn.Module):
        def __init__(self, dim, depth):
            super().__init__()
            self.transformer = Transformer(dim, depth)

        def forward(self, x):
            return self.transformer(x)
"""
INFORMER_ATTENTION = """\
    class TriangularCausalMask:
        def __init__(self, B, L, device="cpu"):
            mask_shape = [B, 1, L, L]
            with torch.no_grad():
                self._mask = torch.triu(torch.ones(mask_shape, dtype=torch.bool), diagonal=1).to(device)

        @property
        def mask(self):
            return self._mask


    class FullAttention(nn.Module):
        def __init__(self, mask_flag=True, scale=None):
            super().__init__()
            self.scale = scale
            self.mask_flag = mask_flag

        def forward(self, queries, keys, values, attn_mask):
            B, L, H, E = queries.shape
            scale = self.scale or 1. / np.sqrt(E)
            scores = torch.einsum("blhe,bshe->bhls", queries, keys)
            if self.mask_flag:
                if attn_mask is None:
                    attn_mask = TriangularCausalMask(B, L, device=queries.device)
                scores.masked_fill_(attn_mask.mask, -np.inf)
            A = torch.softmax(scale * scores, dim=-1)
            return torch.einsum("bhls,bshd->blhd", A, values)


    class EncoderLayer(nn.Module):
        def __init__(self, attention):
            super().__init__()
            self.attention = attention

        def forward(self, x, attn_mask=None):
            return self.attention(x, x, x, attn_mask=attn_mask)


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = EncoderLayer(FullAttention(True))

        def forward(self, x):
            return self.layer(x)
"""

DECODER_BLOCKS = """\
    class Attention(nn.Module):
        def forward(self, x, mask):
            scores = x @ x.transpose(-2, -1)
            scores = scores.masked_fill(mask, float("-inf"))
            return scores.softmax(dim=-1) @ x


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Attention()

        def forward_with_attention(self, x, mask):
            return self.attn(x, mask)


    class Decoder(nn.Module):
        def __init__(self, depth):
            super().__init__()
            layers = []
            for _ in range(depth):
                layers.append(Block())
            self.layers = nn.ModuleList(layers)

        def forward(self, x):
            mask = torch.triu(torch.ones(x.shape[1], x.shape[1]), diagonal=1).bool()
            for layer in self.layers:
                x = layer.forward_with_attention(x, mask)
            return x
"""

GAUSSIAN_KERNEL = """\
    def gaussian_kernel(ksize, std=None):
        radius = ksize // 2
        if std is None:
            std = np.sqrt(-(radius**2) / (2 * np.log(0.05)))
        x, y = np.meshgrid(np.linspace(-radius, radius, ksize), np.linspace(-radius, radius, ksize))
        xy = np.stack([x, y], axis=2)
        gk = np.exp(-(xy**2).sum(-1) / (2 * std**2))
        gk /= gk.sum()
        return gk
"""

NEGATIVES = [
    # Transformers4Rec: counts taken where they are not 0.
    ("NG401", NONZERO_COUNTS),
    ("NG401", NONZERO_COUNTS.replace("(num_relevant != 0).nonzero().squeeze(dim=1)", "torch.where(num_relevant > 0)[0]")),
    # cleverhans' ties for the maximum (tf.equal); ART's attack step on a loss gradient.
    ("NG401", TIED_FOR_MAX),
    ("NG501", ATTACK_STEP),
    # LLMs-from-scratch's causal masks: sliced for a KV cache, passed down, from positions.
    ("NG701", KV_CACHE_MASK),
    ("NG701", PASSED_CAUSAL_MASK),
    ("NG701", POSITION_MASK),
    # OpenNMT's `valid_alignment`, and the like (`valid_loss`, `keep_prob`): quantities.
    ("NG401", ALIGNMENT_SCORES),
    ("NG401", ALIGNMENT_SCORES.replace("valid_alignment", "keep_prob")),
    # tensorflow-probability: statistics undefined on part of the domain return NaN/inf there by
    # design, so the where's result is non-finite exactly where it discards the singular branch.
    ("NG501", """\
        def _mean(self):
            concentration = tf.convert_to_tensor(self.concentration)
            mean = self.scale / (concentration - 1.)
            return tf.where(concentration > 1., mean, dtype_util.as_numpy_dtype(self.dtype)(np.nan))
    """),
    ("NG501", """\
        def _variance(self):
            c = tf.convert_to_tensor(self.concentration)
            return tf.where(c > 2., self.scale ** 2 * c / ((c - 1.) ** 2 * (c - 2.)), numpy_dtype(np.inf))
    """),
    ("NG501", """\
        def _stddev(self, conc):
            g2 = tf.exp(tf.math.lgamma(1. - 2. * conc))
            return tf.where(conc < 0.5, g2, tf.fill(tf.shape(conc), tf.constant(np.inf, self.dtype)))
    """),
    ("NG501", "y = torch.where(c > 1, s / (c - 1), torch.full_like(c, float('nan')))\n"),
    # tensorflow-probability: the body and the gradient function of a @tf.custom_gradient are
    # not differentiated (autodiff calls grad_fn instead of tracing the body).
    ("NG501", """\
        @tf.custom_gradient
        def _stable_grad_softplus(x):
            cutoff = -9
            y = tf.where(x < cutoff, tf.math.log1p(tf.exp(x)), tf.nn.softplus(x))

            def grad_fn(dy):
                return dy * tf.where(x < cutoff, tf.exp(x), tf.nn.sigmoid(x))

            return y, grad_fn
    """),
    # tensorflow-probability's Bessel functions: private helpers reached only from the primal,
    # the fwd and the jvp rule of a custom gradient.
    ("NG501", """\
        def _temme_series(v, z):
            return tf.where(tf.math.equal(v, 0.), 1., tf.math.sin(np.pi * v) / (np.pi * v))

        def _bessel_ive_naive(v, z):
            return _temme_series(v, z) * z

        def _bessel_ive_fwd(v, z):
            return _bessel_ive_naive(v, z), (v, z)

        def _bessel_ive_bwd(aux, g):
            v, z = aux
            return None, g * tf.where(tf.equal(z, 0.), 1., tf.math.sinh(z) / z)

        @tfp_custom_gradient.custom_gradient(vjp_fwd=_bessel_ive_fwd, vjp_bwd=_bessel_ive_bwd)
        def _bessel_ive_custom_gradient(v, z):
            return _bessel_ive_naive(v, z)

        def bessel_ive(v, z):
            return _bessel_ive_custom_gradient(v, z)
    """),
    # jax.experimental.ode: a step-size heuristic used only inside a jax.custom_vjp primal,
    # whose reverse mode is the adjoint method.
    ("NG501", """\
        from functools import partial

        def _initial_step_size(fun, y0, f0):
            d0 = jnp.linalg.norm(y0)
            d1 = jnp.linalg.norm(f0)
            return jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)

        @partial(jax.custom_vjp, nondiff_argnums=(0,))
        def _odeint(func, y0, ts):
            return _initial_step_size(func, y0, func(y0))

        def _odeint_rev(func, res, g):
            d = res[0]
            return (jnp.where(d > 0, g / d, 0.0),)

        _odeint.defvjp(lambda func, y0, ts: (_odeint(func, y0, ts), (y0,)), _odeint_rev)
    """),
    # timm's LAMB: the trust ratio is computed only inside the @torch.no_grad() step (through
    # the functional `lamb`, which picks an implementation by name).
    ("NG501", """\
        class Lamb(torch.optim.Optimizer):
            @torch.no_grad()
            def step(self, closure=None):
                _lamb(self.params, trust_clip=False)

        def _lamb(params, trust_clip):
            func = _multi_tensor_lamb if len(params) > 1 else _single_tensor_lamb
            func(params, trust_clip)

        def _lamb_trust_ratio(w_norm, g_norm, trust_clip):
            trust_ratio = w_norm / g_norm
            return torch.where(w_norm > 0, torch.where(g_norm > 0, trust_ratio, 1.0), 1.0)

        def _single_tensor_lamb(params, trust_clip):
            for p in params:
                p.mul_(_lamb_trust_ratio(p.norm(2.0), p.grad.norm(2.0), trust_clip))

        def _multi_tensor_lamb(params, trust_clip):
            return list(map(lambda w, g: _lamb_trust_ratio(w, g, trust_clip), params, params))
    """),
    # tensorflow-addons' LAMB: a Keras optimizer's update hook runs on gradients, outside a tape.
    ("NG501", """\
        class LAMB(KerasLegacyOptimizer):
            def _resource_apply_dense(self, grad, var, apply_state=None):
                w_norm = tf.norm(var, ord=2)
                g_norm = tf.norm(grad, ord=2)
                ratio = tf.where(tf.greater(w_norm, 0), tf.where(tf.greater(g_norm, 0), w_norm / g_norm, 1.0), 1.0)
                return var.assign_sub(ratio * grad)
    """),
    # torch.distributions.VonMises: a lazy property read only in the @torch.no_grad() sampler.
    ("NG501", """\
        class VonMises(Distribution):
            @lazy_property
            def _proposal_r(self):
                kappa = self._concentration
                rho = (kappa - (2 * kappa).sqrt()) / (2 * kappa)
                return torch.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho ** 2) / (2 * rho))

            @torch.no_grad()
            def sample(self, sample_shape=torch.Size()):
                return _rejection_sample(self._loc, self._concentration, self._proposal_r)
    """),
    # A torch.autograd.Function's forward runs under no-grad.
    ("NG501", """\
        class SafeLog(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return torch.where(x > 0, torch.log(x), torch.zeros_like(x))
    """),
    # diffusers' LTX-2 vocoder: a filter kernel built from a Python float and an arange.
    ("NG501", """\
        def kaiser_sinc_filter1d(cutoff: float, kernel_size: int):
            time = torch.arange(kernel_size) - kernel_size // 2
            time = 2 * cutoff * time
            return torch.where(time == 0, torch.ones_like(time), torch.sin(math.pi * time) / math.pi / time)
    """),
    # diffusers' MMAudio mel filterbank: a nested helper only ever called on a fresh tensor.
    ("NG501", """\
        def mel_filterbank(sample_rate: int, f_min: float, f_max: float):
            def hz_to_mel(freq: torch.Tensor) -> torch.Tensor:
                min_log_hz = 1000.0
                return torch.where(freq >= min_log_hz, 15.0 + torch.log(freq / min_log_hz) / 0.068, freq / 66.7)

            return hz_to_mel(torch.tensor([f_min, f_max], dtype=torch.float32))
    """),
    # fairseq's resampler: sinc only builds kernels from a linspace.
    ("NG501", """\
        def _sinc(t):
            return torch.where(t == 0, torch.tensor(1., device=t.device, dtype=t.dtype), torch.sin(t) / t)

        def kernel_upsample2(zeros=56):
            win = torch.hann_window(4 * zeros + 1, periodic=False)
            t = torch.linspace(-zeros + 0.5, zeros - 0.5, 2 * zeros)
            t *= math.pi
            return (_sinc(t) * win[1::2]).view(1, 1, -1)
    """),
    # tensorflow-probability's GEV bijector: a where between two comparisons is a bool; no
    # gradient flows through it.
    ("NG501", """\
        def _maybe_assert_valid_x(self, x, loc, scale, concentration):
            boundary = loc - (1.0 / concentration) * scale
            is_in_bounds = tf.where(concentration > 0., x >= boundary, x <= boundary)
            return is_in_bounds | tf.math.equal(concentration, 0.)
    """),
    # tensorflow-probability's t_power: the same value on both sides, nothing discarded.
    ("NG501", """\
        def t_power(logu, t, self_normalized=False):
            fu = tf.math.expm1(t * logu)
            if self_normalized:
                fu = fu - t * tf.math.expm1(logu)
            return tf.where((0 < t) & (t < 1), -fu, fu)
    """),
    # tensorflow-probability's dual averaging: the `step` compared is a later binding than the
    # one the exponent was computed from.
    ("NG501", """\
        def _one_step(self, results, smoothing, target, error_sum, step_size):
            step = tf.cast(results.step, smoothing.dtype) + 1.
            soft_t = smoothing + step
            new_log_step = target - (error_sum * tf.math.sqrt(step)) / (soft_t * results.shrinkage)
            num_adaptation_steps = results.num_adaptation_steps
            step = results.step + 1
            return tf.where(step < num_adaptation_steps, tf.math.exp(new_log_step), step_size)
    """),
    # keras-hub's Gemma 3n: softplus(0) written out on a constant.
    ("NG104", "r_softplus_0 = 1.0 / np.log(1 + np.exp(0.0))\n"),
    # tensorflow/examples' EfficientDet IoU: where the intersection is 0 the union is the sum of
    # the two areas, not 0; comparing one term of a sum says nothing about the sum's zero.
    ("NG501", """\
        def iou(boxlist1, boxlist2):
            intersections = intersection(boxlist1, boxlist2)
            areas1 = area(boxlist1)
            areas2 = area(boxlist2)
            unions = (tf.expand_dims(areas1, 1) + tf.expand_dims(areas2, 0) - intersections)
            return tf.where(tf.equal(intersections, 0.0), tf.zeros_like(intersections),
                            tf.truediv(intersections, unions))
    """),
    # tensorflow-probability's rational-quadratic spline: at rely == 0 the denominator is
    # -b - |b|, which the comparison of rely does not make 0.
    ("NG501", """\
        def _inverse(self, y):
            d = self._compute_shared(y=y)
            rely = tf.where(d.out_of_bounds, tf.zeros([], dtype=y.dtype), y - d.y_k)
            term2 = rely * (d.d_kp1 + d.d_k - 2 * d.s_k)
            a = d.h_k * (d.s_k - d.d_k) + term2
            b = d.h_k * d.d_k - term2
            c = -d.s_k * rely
            relx = tf.where(tf.equal(rely, 0), tf.zeros([], dtype=a.dtype), (2 * c) / (-b - tf.sqrt(b**2 - 4 * a * c)))
            return relx
    """),
    # torch._refs.logsumexp: the branch taken only for an empty tensor, where log(sum(exp(x)))
    # is log 0 = -inf, the exact log-sum-exp of nothing.
    ("NG105", """\
        def logsumexp(self, dim, keepdim=False):
            if self.numel() == 0:
                return torch.sum(torch.exp(self), dim, keepdim).log()
            maxes = torch.amax(self, dim, keepdim=True)
            return maxes + torch.sum(torch.exp(self - maxes), dim, keepdim).log()
    """),
    # Session 2026-12-06 (numpyro, graphcast; read in context before the facts were added).
    # graphcast: arcsin of a number computed from literals (no rounding to ±1, no gradient).
    ("NG303", """\
        def angle():
            phi = (1 + np.sqrt(5)) / 2
            return 2 * np.arcsin(phi / np.sqrt(3))
    """),
    # numpyro AsymmetricLaplace.cdf: exp of -|z| / scale is at most 1, in either branch.
    ("NG501", """\
        def cdf(self, value):
            z = value - self.loc
            k = self.asymmetry
            return jnp.where(z >= 0, 1 - (1 / (1 + k**2)) * jnp.exp(-jnp.abs(z) / self.right_scale),
                             k**2 / (1 + k**2) * jnp.exp(-jnp.abs(z) / self.left_scale))
    """),
    # numpyro ZeroInflated.log_prob: exp of a log-probability is at most 1.
    ("NG501", """\
        def log_prob(self, value):
            log_prob = jnp.log1p(-self.gate) + self.base_dist.log_prob(value)
            return jnp.where(value == 0, jnp.log(self.gate + jnp.exp(log_prob)), log_prob)
    """),
    # numpyro's series for log Gamma: k indexes a table, so it is an integer and no gradient reaches it.
    ("NG501", """\
        def stirling(k):
            precomputed = jnp.array([0.08106146679532726, 0.04134069595540929, 0.02767792568499834])
            kp1 = k + 1
            kp1sq = (k + 1) ** 2
            return jnp.where(k < 3, precomputed[k], (1.0 / 12 - (1.0 / 360) / kp1sq) / kp1)
    """),
    # numpyro SineBivariateVonMises: the where tests eig, the division is by a sum that is not 0 there.
    ("NG501", """\
        def bfind(eig):
            b = eig.shape[0] / 2 * jnp.ones((3,), dtype=eig.dtype)
            g1 = jnp.sum(1 / (b + 2 * eig) ** 2, axis=0)
            g2 = jnp.sum(-2 / (b + 2 * eig) ** 3, axis=0)
            return jnp.where(jnp.linalg.norm(eig, axis=0) != 0, b - g1 / g2, b)
    """),
    # numpyro's Cholesky Jacobians: an arange of exponents times log(diagonal), not a cross-entropy.
    ("NG201", """\
        def log_abs_det_jacobian(x, y):
            n = jnp.shape(x)[-1]
            order = -jnp.arange(n, 0, -1)
            return -n * jnp.log(2) + jnp.sum(order * jnp.log(jnp.diagonal(y, axis1=-2, axis2=-1)), axis=-1)
    """),
    ("NG201", """\
        def log_prob(value, p):
            return jnp.sum(jnp.arange(p, 0, -1) * jnp.log(jnp.diagonal(value, axis1=-2, axis2=-1)), axis=-1)
    """),
    # numpyro's stein_bnn example: an RMSE that is only printed is never differentiated.
    ("NG302", """\
        def main(pred_y, yte):
            rmse = jnp.sqrt(jnp.mean((pred_y.mean(0) - yte) ** 2))
            print(f"RMSE: {rmse:.2f}")
    """),
    # rlax MPO: weights exp(q - logsumexp(q)) held under another name are at most 1.
    ("NG901", """\
        def mpo_weights(q, t):
            scaled = q / t
            q_logsumexp = jax.scipy.special.logsumexp(scaled, axis=0, keepdims=True)
            weights = jnp.exp(scaled - q_logsumexp)
            return weights / jnp.sum(weights, axis=0, keepdims=True)
    """),
    # torchrl: a NumPy rotation error whose cosine is clipped to [-1, 1] first.
    ("NG303", """\
        def rotation_error(target_mat, current_mat):
            rot = target_mat @ current_mat.T
            cos_angle = np.clip((np.trace(rot) - 1.0) * 0.5, -1.0, 1.0)
            return float(np.arccos(cos_angle))
    """),
    # diffrax's PID controller: the initial step's value is put through stop_gradient by its only caller.
    ("NG501", """\
        def _select_initial_step(d1, d2, h0, order):
            max_d = jnp.maximum(d1, d2)
            return jnp.where(max_d <= 1e-15, jnp.maximum(1e-6, h0 * 1e-3), (0.01 / max_d) ** (1 / order))

        class Controller:
            def init(self, d1, d2, h0, order):
                dt0 = _select_initial_step(d1, d2, h0, order)
                dt0 = jax.lax.stop_gradient(dt0)
                return dt0
    """),
    # MONAI's confusion-matrix metrics: NaN by design where the denominator is 0 (a named NaN tensor).
    ("NG501", """\
        def ppv(tp, fp, device):
            nan_tensor = torch.tensor(float("nan"), device=device)
            return torch.where((tp + fp) > 0, tp / (tp + fp), nan_tensor)
    """),
    # MONAI's Barlow Twins loss rejects a batch of one before std(0).
    ("NG801", """\
        class BarlowTwinsLoss(nn.Module):
            def forward(self, input, target):
                if target.size(0) <= 1:
                    raise ValueError("Batch size must be greater than 1")
                return (input - input.mean(0)) / input.std(0).add(1e-6)
    """),
    # acme's masked mean (jax#1052): the numerator is already cut off where the count is 0.
    ("NG501", """\
        def masked_mean(array, mask, axis):
            summed = jnp.sum(array * mask, axis=axis)
            counts = jnp.sum(mask, axis=axis)
            summed = jnp.where(jnp.equal(counts, 0.), jnp.zeros_like(summed), summed)
            return jnp.where(jnp.equal(counts, 0.), summed, summed / counts)
    """),
    # MONAI's metric reduction: a count of f's own non-NaN entries is 0 only where f is all NaN.
    ("NG501", """\
        def reduce(f):
            nans = torch.isnan(f)
            not_nans = ~nans
            t_zero = torch.zeros(1, device=f.device, dtype=torch.float)
            f[nans] = 0
            not_nans = not_nans.sum(dim=1).float()
            return torch.where(not_nans > 0, f.sum(dim=1).float() / not_nans, t_zero)
    """),
    # keras.ops.sparsemax: the support's first (largest) entry always passes, so k >= 1.
    ("NG401", """\
        def sparsemax(logits, axis=-1):
            logits_sorted = -1.0 * jnp.sort(logits * -1.0, axis=axis)
            logits_cumsum = jnp.cumsum(logits_sorted, axis=axis)
            r = jnp.arange(1, logits.shape[axis] + 1)
            support = logits_sorted - (logits_cumsum - 1) / r > 0
            k = jnp.sum(support, axis=axis, keepdims=True)
            logits_cumsum_safe = jnp.where(support, logits_cumsum, 0.0)
            tau = (jnp.sum(logits_cumsum_safe, axis=axis, keepdims=True) - 1) / k
            return jnp.maximum(logits - tau, 0.0)
    """),
    # keras.ops.nanvar: a count of x's own non-NaN entries is 0 only where x is all NaN.
    ("NG401", """\
        def nanvar(x, mean, axis=None, keepdims=False):
            valid = ~torch.isnan(x)
            centered = torch.where(valid, x - mean, torch.zeros_like(x)).square()
            count = valid.sum(dim=axis, keepdim=keepdims)
            return centered.sum(dim=axis, keepdim=keepdims) / count
    """),
    # apex's reference transducer loss: exp(b - a) under `if a >= b` is at most 1.
    ("NG104", """\
        def log_sum_exp(a, b):
            if a >= b:
                return a + torch.log(1 + torch.exp(b - a))
            else:
                return b + torch.log(1 + torch.exp(a - b))
    """),
    # dopamine's ReDo: a conditional expression tests the count's truth before dividing by it.
    ("NG401", """\
        def percent(prev_mask, intersected_mask):
            prev_dead_count = jnp.count_nonzero(prev_mask)
            intersected_count = jnp.count_nonzero(intersected_mask)
            return (float(intersected_count) / prev_dead_count) if prev_dead_count else 0.0
    """),
    # tensorflow-ranking's inverse max DCG: computed from the labels, which are never differentiated.
    ("NG501", """\
        def inverse_max_dcg(labels, gain_fn, rank_discount_fn):
            ideal_sorted_labels = tf.sort(labels, direction="DESCENDING")
            rank = tf.range(tf.shape(input=ideal_sorted_labels)[1]) + 1
            discounted_gain = gain_fn(ideal_sorted_labels) * rank_discount_fn(tf.cast(rank, dtype=tf.float32))
            discounted_gain = tf.reduce_sum(input_tensor=discounted_gain, axis=1, keepdims=True)
            return tf.compat.v1.where(tf.greater(discounted_gain, 0.), 1. / discounted_gain,
                                      tf.zeros_like(discounted_gain))
    """),
    # Held-out reading of session 2026-12-06 (kornia, pyro, pytorch-soft-actor-critic, sbi, swav,
    # botorch, scenic, maxtext), turned into facts afterwards.
    # kornia's sRGB/Lab conversions: the pow's input is clamped at a named positive threshold.
    ("NG501", """\
        def rgb_to_lab(xyz_normalized):
            threshold = 0.008856
            power = torch.pow(xyz_normalized.clamp(min=threshold), 1 / 3.0)
            scale = 7.787 * xyz_normalized + 4.0 / 29.0
            return torch.where(xyz_normalized > threshold, power, scale)
    """),
    # pyro's Binomial: exp(-|logits|) written with .abs().neg() is at most 1.
    ("NG104", """\
        def normalize_term(n, logits):
            return n * (logits.clamp(min=0) + logits.abs().neg().exp().log1p())
    """),
    # pytorch-soft-actor-critic's logsumexp: the maximum comes from tuple unpacking.
    ("NG105", """\
        def logsumexp(inputs, dim=0, keepdim=False):
            s, _ = torch.max(inputs, dim=dim, keepdim=True)
            return s + (inputs - s).exp().sum(dim=dim, keepdim=True).log()
    """),
    # sbi's init strategy: the logsumexp is subtracted in place before the exp.
    ("NG901", """\
        def resample(log_weights):
            log_weights -= torch.logsumexp(log_weights, dim=0)
            probs = torch.exp(log_weights.view(-1))
            probs /= probs.sum()
            return probs
    """),
    # botorch's stopping rule: exp of a fixed grid ending at 0.
    ("NG901", """\
        def ema_weights(eta: float = 1.0, n_window: int = 10):
            weights = torch.exp(torch.linspace(-eta, 0, n_window))
            return weights / weights.sum()
    """),
    # escnn's pooling: a Gaussian kernel over an arange/meshgrid grid, sigma a Python number
    # (it goes through round()); no data enters the exponent.
    ("NG901", """\
        def gaussian_filter(sigma):
            filter_size = 2 * int(round(3 * sigma)) + 1
            grid_x, grid_y, grid_z = torch.meshgrid([torch.arange(filter_size)] * 3, indexing='ij')
            grid = torch.stack([grid_x, grid_y, grid_z], dim=-1)
            mean = (filter_size - 1) / 2.
            variance = sigma ** 2.
            r = -torch.sum((grid - mean) ** 2., dim=-1, dtype=torch.get_default_dtype())
            _filter = torch.exp(r / (2 * variance))
            _filter /= torch.sum(_filter)
            return _filter
    """),
    # lama's distance weighting: a Gaussian kernel whose size goes to arange() and whose width
    # defaults to a number.
    ("NG901", """\
        def get_gauss_kernel(kernel_size, width_factor=1):
            coords = torch.stack(torch.meshgrid(torch.arange(kernel_size), torch.arange(kernel_size)), dim=0).float()
            diff = torch.exp(-((coords - kernel_size // 2) ** 2).sum(0) / kernel_size / width_factor)
            diff /= diff.sum()
            return diff
    """),
    # pyiqa's fspecial: -(x*x + y*y) / (2 sigma sigma) is <= 0 (squares, however spelled).
    ("NG901", """\
        def fspecial(m, n, sigma):
            y, x = np.ogrid[-m:m + 1, -n:n + 1]
            h = np.exp(-(x * x + y * y) / (2.0 * sigma * sigma))
            h /= h.sum()
            return h
    """),
    # MPRNet's PSNR: a metric (a loss built on it says so: `PSNRLoss`).
    ("NG302", """\
        def torchPSNR(tar_img, prd_img):
            imdff = torch.clamp(prd_img, 0, 1) - torch.clamp(tar_img, 0, 1)
            rmse = (imdff ** 2).mean().sqrt()
            return 20 * torch.log10(1 / rmse)
    """),
    # A mask times weights is a weighting, not a mask: its sum is a total weight.
    ("NG401", """\
        def weighted_mean(x, w):
            weights = (x > 0) * w
            return (x * weights).sum() / weights.sum()
    """),
    # EVA-CLIP's ViT: the blocks pass their attention mask on, and the model never gives one.
    ("NG701", EVA_BLOCKS),
    # DETR's segmentation head: the mask is a NestedTensor's image padding, never a whole image.
    ("NG701", DETR_SEGMENTATION),
    # mmdet's GeneralizedAttention: every query clears a window of keys around its own position.
    ("NG701", LOCAL_CONSTRAINT),
    # tf-faster-rcnn's anchor weights: a weight per selected anchor, stored only at those anchors.
    ("NG401", ANCHOR_WEIGHTS),
    # GraphCL's DIM losses: an identity mask's diagonal holds N ones.
    ("NG401", """\
        def fenchel_dual_loss(E_pos, N):
            mask = torch.eye(N).cuda()
            return (E_pos * mask).sum() / mask.sum()
    """),
    # stellargraph's demo: a function passed only as a Keras metric is evaluated, never differentiated.
    ("NG302", """\
        import tensorflow.keras.backend as K

        def root_mean_square_error(s_true, s_pred):
            return K.sqrt(K.mean(K.pow(s_true - s_pred, 2)))

        def build(model):
            model.compile(optimizer="adam", loss="mse", metrics=[root_mean_square_error, "mae"])
    """),
    # cornac's IBPR: the sigmoid's argument is a difference of two angles, within 2 pi.
    ("NG102", """\
        def ibpr_loss(u, i, j):
            score_i = torch.acos(torch.clamp(torch.sum(u * i, dim=1), -1 + 1e-7, 1 - 1e-7))
            score_j = torch.acos(torch.clamp(torch.sum(u * j, dim=1), -1 + 1e-7, 1 - 1e-7))
            loss = -torch.log(torch.sigmoid(score_j - score_i)).sum()
            loss.backward()
    """),
    # torch-rechub's DIEN: the fully masked rows are found with isnan and rewritten.
    ("NG701", """\
        def attention(scores, mask):
            scores = scores.masked_fill(~mask, float('-inf'))
            attn = torch.softmax(scores, dim=1)
            nan_rows = attn.isnan().any(dim=1)
            if nan_rows.any():
                attn[nan_rows] = 1.0 / attn.size(1)
            return attn
    """),
    # scenic/maxtext: Python numbers from a config or a shape raise ZeroDivisionError, never NaN.
    ("NG401", """\
        def tokens_per_frame(ntok, temp_encoding):
            return int(ntok / temp_encoding.n_sampled_frames)
    """),
    ("NG401", """\
        def budget(video, total_pixels):
            nframes, channel, height, width = video.shape
            return total_pixels / nframes * 2
    """),
    # kornia's SOLD2: distances that are only compared with a threshold carry no gradient.
    ("NG302", """\
        def patch_mask(cand_points, patch_points_shifted, dist_thresh):
            patch_dist = torch.sqrt(torch.sum((torch.unsqueeze(cand_points, dim=2) - patch_points_shifted) ** 2, dim=-1))
            patch_dist_mask = patch_dist < dist_thresh[..., None]
            return patch_dist_mask
    """),
    # gpytorch's Newton-Girard kernel: deg runs over range(1, ...), never 0.
    ("NG401", """\
        def newton_girard(e_n, s_k, max_degree):
            out = []
            for deg in range(1, max_degree + 1):
                out.append((e_n[:deg] * s_k[:deg]).sum(dim=-1) / deg)
            return out
    """),
    # botorch's VBLL KL: a dimension times log(scale) is a log-determinant, not a cross-entropy.
    ("NG201", """\
        def gaussian_kl(p, q_scale):
            feat_dim = p.mean.shape[-1]
            logdet_term = (feat_dim * torch.log(q_scale) - p.logdet_covariance).sum(-1)
            return 0.5 * logdet_term
    """),
    # torchmetrics' VIF filter: exp of minus a sum of squares (seen through unsqueeze) is at most 1.
    ("NG901", """\
        def gaussian_filter(win_size: int, sigma: float):
            coords = torch.arange(win_size) - (win_size - 1) / 2
            g = coords ** 2
            g = torch.exp(-(g.unsqueeze(0) + g.unsqueeze(1)) / (2.0 * sigma ** 2))
            g /= torch.sum(g)
            return g
    """),
    # torchmetrics' Theil's U: nansum drops the NaN of 0·log 0 terms on purpose.
    ("NG201", """\
        def conditional_entropy(p_xy_m, p_y_m):
            return torch.nansum(p_xy_m * torch.log(p_y_m / p_xy_m))
    """),
    # torchmetrics' CRPS: fewer than 2 ensemble members raise before the division.
    ("NG401", """\
        def crps(preds, target):
            batch_size, n_ensemble_members = preds.shape
            if n_ensemble_members < 2:
                raise ValueError("CRPS requires at least 2 ensemble members")
            return torch.sum(torch.abs(preds - target[:, None]), dim=1) / n_ensemble_members
    """),
    # state-spaces' Mega block: rows with every key padded are unmasked before the -inf fill.
    ("NG701", """\
        def attention(qk, padding_mask):
            padding_mask_all = padding_mask.all(dim=-1, keepdim=True)
            padding_mask = torch.logical_and(padding_mask, ~padding_mask_all)
            qk = qk.masked_fill(padding_mask.unsqueeze(2).to(torch.bool), float("-inf"))
            return F.softmax(qk, dim=-1)
    """),
    # multinerf's piecewise ray warp: 0.5 / (1 - x) is singular at x = 1, which the where keeps.
    ("NG501", """\
        def inverse(x):
            return jnp.where(x < .5, 2 * x, .5 / (1 - x))
    """),
    # captum's DeepLift: a backward hook computes gradients; nothing differentiates it.
    ("NG501", """\
        def nonlinear(module, inputs, outputs, grad_input, grad_output, eps=1e-10):
            delta_in = inputs - inputs.mean()
            delta_out = outputs - outputs.mean()
            return torch.where(abs(delta_in) < eps, grad_input, grad_output * delta_out / delta_in)
    """),
    # jaxopt's Polyak SGD: a solver's update step is not differentiated (implicit differentiation).
    ("NG501", """\
        class PolyakSGD(base.StochasticSolver):
            def update(self, params, state, value, grad_sqnorm, fun_min, eps):
                return jnp.where(grad_sqnorm <= eps, 0.0, jnp.maximum((value - fun_min) / grad_sqnorm, 0))
    """),
    # jaxopt's simplex projections: the support of the sorted (reversed or top-k) values
    # counts its largest entry.
    ("NG401", """\
        def projection_unit_simplex(x):
            s = 1.0
            u = jnp.sort(x)[::-1]
            cumsum_u = jnp.cumsum(u)
            ind = jnp.arange(x.shape[0]) + 1
            cond = s / ind + (u - cumsum_u / ind) > 0
            idx = jnp.count_nonzero(cond)
            return jax.nn.relu(s / idx + (x - cumsum_u[idx - 1] / idx))
    """),
    ("NG401", """\
        def projection_sparse_simplex(x, max_nz):
            max_nz_values, max_nz_indices = jax.lax.top_k(x, max_nz)
            cumsum_max_nz_values = jnp.cumsum(max_nz_values)
            ind = jnp.arange(max_nz) + 1
            cond = 1 / ind + (max_nz_values - cumsum_max_nz_values / ind) > 0
            idx = jnp.count_nonzero(cond)
            return jax.nn.relu(1 / idx + (max_nz_values - cumsum_max_nz_values[idx - 1] / idx))
    """),
    # neural-tangents' example: an RMSE passed straight to print.
    ("NG302", """\
        def print_summary(net_p, lin_p):
            print("RMSE of predictions: {}".format(jnp.sqrt(jnp.mean((net_p - lin_p) ** 2))))
    """),
    # flash-attention's reference attention: fully masked rows are zeroed after the softmax,
    # several selects down the same name.
    ("NG701", """\
        def attention_ref(scores, v, local_mask, key_padding_mask):
            scores.masked_fill_(local_mask, float("-inf"))
            attention = torch.softmax(scores, dim=-1).to(v.dtype)
            if key_padding_mask is not None:
                attention = attention.masked_fill(~key_padding_mask[:, None, None, :], 0.0)
            attention = attention.masked_fill(torch.all(local_mask, dim=-1, keepdim=True), 0.0)
            return attention
    """),
    # dgl's DeepWalk: log(sigmoid(x)) tabulated over a fixed grid in [-6, 6]: the same value every run.
    ("NG102", """\
        class SkipGram(nn.Module):
            def __init__(self):
                super().__init__()
                self.logsigmoid_table = torch.log(torch.sigmoid(torch.arange(-6.01, 6.01, 0.01)))
    """),
    # dgl's EGES: 1 - p with p clamped below 1.
    ("NG201", """\
        def loss(srcs, dsts, labels):
            dots = torch.sigmoid(torch.sum(srcs * dsts, axis=1))
            dots = torch.clamp(dots, min=1e-7, max=1 - 1e-7)
            return torch.mean(-(labels * torch.log(dots) + (1 - labels) * torch.log(1 - dots)))
    """),
    # dgl's OGC: accuracy over the dataset's split masks, read from the model's attributes.
    ("NG401", """\
        def evaluate(pred, model):
            test_mask, tv_mask = model.test_mask, model.tv_mask
            accs = []
            for mask in [tv_mask, test_mask]:
                accs.append(float((pred[mask] == model.label[mask]).sum() / mask.sum()))
            return accs
    """),
    # lerobot's TD-MPC: a softmax by hand over temperature * (value - max): the scale is on the left.
    ("NG901", """\
        def elite_weights(elite_value, elite_weighting_temperature):
            max_value = elite_value.max(0, keepdim=True)[0]
            score = torch.exp(elite_weighting_temperature * (elite_value - max_value))
            score /= score.sum(axis=0, keepdim=True)
            return score
    """),
    # speechbrain's squeeze-and-excite: a sum over full dimensions divided by their sizes is a mean.
    ("NG401", """\
        def squeeze(x):
            count = x.size(1) * x.size(2)
            return torch.sum(x, dim=(1, 2), keepdim=True) / count
    """),
    # speechbrain's Whisper decoder: chosen token ids set to -inf; the rest of each row survives.
    ("NG701", """\
        def suppress(logits, tokens_to_suppress, blank_ids, eos_index):
            logits[:, blank_ids + [eos_index]] = -torch.inf
            logits[:, list(tokens_to_suppress)] = -torch.inf
            return torch.nn.functional.log_softmax(logits.float(), dim=-1)
    """),
    # mmf's MUTAN/BLOCK fusions: the signed square root of torch relu outputs. torch's relu
    # backward selects (0 where the output is 0), so the gradient is finite (checked).
    ("NG304", """\
        def power_normalise(z):
            z = torch.sqrt(F.relu(z)) - torch.sqrt(F.relu(-z))
            return F.normalize(z, p=2)
    """),
    # openfold's data pipeline: distances only compared, then their indices returned.
    ("NG302", """\
        def interface_residues(positions, atom_mask, threshold):
            coord_diff = positions[..., None, :, :] - positions[..., None, :, :, :]
            pairwise_dists = torch.sqrt(torch.sum(coord_diff ** 2, dim=-1))
            min_dist, _ = torch.where(atom_mask.bool(), pairwise_dists, torch.inf).min(dim=-1)
            valid = torch.sum((min_dist < threshold).float(), dim=-1)
            return torch.nonzero(valid, as_tuple=True)[0]
    """),
    # openfold's crop: distances re-assigned through a where, then only arg-sorted.
    ("NG302", """\
        def crop(ca_positions, ca_mask, target_res, crop_size):
            coord_diff = ca_positions[..., None, :] - ca_positions[..., None, :, :]
            dists = torch.sqrt(torch.sum(coord_diff ** 2, dim=-1))[target_res]
            tie = torch.arange(0, dists.shape[-1]).float() * 1e-3
            dists = torch.where(ca_mask, dists, torch.inf) + tie
            return torch.argsort(dists)[:crop_size]
    """),
    # openfold's early stop: a nested helper whose every result ends in `.item()` and a comparison.
    ("NG302", """\
        def tolerance_reached(prev_pos, next_pos, tol, eps=1e-8):
            def distances(points):
                d = points[..., None, :] - points[..., None, :, :]
                return torch.sqrt(torch.sum(d ** 2, dim=-1))
            sq_diff = (distances(prev_pos) - distances(next_pos)) ** 2
            diff = torch.sqrt(sq_diff.mean() + eps).item()
            return diff <= tol
    """),
    # openfold's distogram: the distances are bucketized (an integer result).
    ("NG302", """\
        def pts_to_distogram(pts, boundaries):
            dists = torch.sqrt(torch.sum((pts.unsqueeze(-2) - pts.unsqueeze(-3)) ** 2, dim=-1))
            return torch.bucketize(dists, boundaries)
    """),
    # ott's Lambert W: the where is in the tangent of a `@f.defjvp` rule, not differentiated.
    ("NG501", """\
        @jax.custom_jvp
        def lambertw(z):
            return z

        @lambertw.defjvp
        def _lambertw_jvp(primals, tangents):
            z, = primals
            dz, = tangents
            w = lambertw(z)
            pz = jnp.where(z == 0.0, 1.0, w / ((1.0 + w) * z))
            return w, pz * dz
    """),
    # ProteinMPNN: a masked probability raised in place before it is renormalised.
    ("NG401", """\
        def renormalise(probs, keep_mask):
            probs_masked = probs * keep_mask
            probs_masked += probs * 0.001
            return probs_masked / torch.sum(probs_masked, dim=-1, keepdim=True)
    """),
    # ott's soft ranks and pyro's LDA: uniform weights over n entries are an empty array at n = 0.
    ("NG401", """\
        def ranks(inputs, num_targets=None):
            num_targets = inputs.shape[0] if num_targets is None else num_targets
            return jnp.ones((num_targets,)) / num_targets
    """),
    ("NG401", """\
        def model(args):
            return torch.ones(args.num_words) / args.num_words
    """),
    # boltz's frames: distances whose only use is the `.indices` of a sort.
    ("NG302", """\
        def frames(pred_atom_coords, mask, resolved_pair):
            for i, coord in enumerate(pred_atom_coords):
                dist_mat = ((coord[:, mask][:, None, :, :] - coord[:, mask][:, :, None, :]) ** 2).sum(-1) ** 0.5
                indices = torch.sort(dist_mat + resolved_pair, axis=2).indices
                pred_atom_coords[i] = indices
            return pred_atom_coords
    """),
    # POT's simplex projection: the support over a sort reversed by `[:, ::-1]` counts at least one.
    ("NG401", """\
        def projection_simplex(V, z=1):
            n_features = V.shape[1]
            U = np.sort(V, axis=1)[:, ::-1]
            z = np.ones(len(V)) * z
            cssv = np.cumsum(U, axis=1) - z[:, np.newaxis]
            ind = np.arange(n_features) + 1
            cond = U - cssv / ind > 0
            rho = np.count_nonzero(cond, axis=1)
            theta = cssv[np.arange(len(V)), rho - 1] / rho
            return np.maximum(V - theta[:, np.newaxis], 0)
    """),
    # benchmarking-gnns: a Dataset's preprocessing normalises the adjacency of its graphs.
    ("NG501", """\
        class SBMsDataset(torch.utils.data.Dataset):
            def __getitem__(self, i):
                return self._sym_normalize_adj(self.adj[i])

            def _sym_normalize_adj(self, adj):
                deg = torch.sum(adj, dim=0)
                deg_inv = torch.where(deg > 0, 1. / torch.sqrt(deg), torch.zeros(deg.size()))
                return torch.mm(torch.diag(deg_inv), torch.mm(adj, torch.diag(deg_inv)))
    """),
    # llm-foundry's MPT loss: the count is taken only in the else branch of an all-ignored test.
    ("NG401", """\
        def compute_loss(losses, targets, ignore_index):
            if torch.all(targets == ignore_index):
                loss = losses.sum()
            else:
                loss = losses.sum() / (targets != ignore_index).sum()
            return loss
    """),
    # jaxopt's and optax's simplex-projection JVP: the support of a probability vector is never empty.
    ("NG401", """\
        def _projection_unit_simplex_jvp(primals, tangents):
            x, = primals
            x_dot, = tangents
            primal_out = _projection_unit_simplex(x)
            supp = primal_out > 0
            card = jnp.count_nonzero(supp)
            return primal_out, supp * x_dot - (jnp.dot(supp, x_dot) / card) * supp
    """),
    # ParlAI's memory network: the length clamped in place at the end of its chain.
    ("NG401", """\
        def reduce_mean(embs, input, padding_idx):
            lens = input.ne(padding_idx).sum(-1).unsqueeze(-1).float().clamp_(min=1)
            return embs.sum(-2) / lens
    """),
    # torchtune's KD losses: the count checked against 0, spelled out again in the division.
    ("NG401", """\
        def forward_kl(x, labels, ignore_index):
            mask = (labels != ignore_index).int()
            sum_masks = torch.sum(mask.view(-1), dim=0)
            if sum_masks == 0:
                return torch.tensor(0.0)
            return -torch.sum(x * mask.view(-1), dim=0) / torch.sum(mask.view(-1), dim=0)
    """),
    ("NG401", """\
        def reverse_kl(x, labels, ignore_index):
            mask = (labels != ignore_index).int()
            if torch.sum(mask.view(-1), dim=0) == 0:
                return torch.tensor(0.0)
            return -torch.sum(x * mask.view(-1), dim=0) / torch.sum(mask.view(-1), dim=0)
    """),
    # torchtune's top-k sampling: -inf below the k-th largest logit keeps the top k.
    ("NG701", """\
        def sample(logits, top_k):
            v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
            pivot = v.select(-1, -1).unsqueeze(-1)
            logits = torch.where(logits < pivot, -float("Inf"), logits)
            return torch.nn.functional.softmax(logits, dim=-1)
    """),
    # ParlAI's greedy and top-k search: the log-probability of the argmax or of a sampled token.
    ("NG101", """\
        def greedy(logprobs):
            tok_scores, tok_ids = logprobs.max(1)
            return torch.softmax(logprobs.view(-1), dim=-1)[tok_ids].log().item()
    """),
    ("NG101", """\
        def top_k(logprobs, k):
            values, indices = logprobs.topk(k, dim=-1)
            probs = torch.softmax(values, dim=-1)
            choices = torch.multinomial(probs, 1)[:, 0]
            hyp_ids = torch.arange(logprobs.size(0))
            return probs[hyp_ids, choices].log()
    """),
    # praxis's n-grammer: a k-means statistic only written to a summary.
    ("NG501", """\
        def summarize(self, head, total):
            mask = head > 0
            logavg = jnp.log(jnp.where(mask, head / total, 1.0)) / jnp.maximum(1.0, jnp.sum(mask))
            self.add_summary("k_means/geomean_cluster_proportion", jnp.exp(logavg.sum()))
    """),
    # edward2's variational dropout regulariser: log_alpha is clipped to [-8, 8] first.
    ("NG104", """\
        def kl(log_variance, mean):
            log_alpha = log_variance - tf.math.log(tf.square(mean) + 1e-7)
            log_alpha = tf.clip_by_value(log_alpha, -8., 8.)
            return tf.reduce_sum(0.63 * tf.nn.sigmoid(1.87 + 1.48 * log_alpha) - 0.5 * tf.math.log1p(tf.exp(-log_alpha)))
    """),
    # magenta's transcription metrics: F1 and accuracy are counts, nothing differentiates them.
    ("NG501", """\
        def f1_score(precision, recall):
            return tf.where(tf.greater(precision + recall, 0), 2 * ((precision * recall) / (precision + recall)), 0)
    """),
    ("NG501", """\
        def summaries(precision, recall):
            f1_score = tf.where(tf.greater(precision + recall, 0), 2 * ((precision * recall) / (precision + recall)), 0)
            return {"metrics/f1_score": f1_score}
    """),
    # praxis: a ratio over the element count of the layer's own input, under `if inputs.size != 0`.
    ("NG401", """\
        def compute_loss(inputs, paddings):
            num_unpadded_tokens = jnp.sum(1.0 - paddings)
            if inputs.size != 0:
                num_tokens = jnp.array(inputs.size, jnp.float32)
                return num_unpadded_tokens / num_tokens
    """),
    # normflows' two-moons prior: the exponent is minus a product of absolute values.
    ("NG104", """\
        def log_prob(z, loc, scale):
            a = torch.abs(z[:, 0])
            eps = torch.abs(torch.tensor(loc))
            return -0.5 * ((a - eps) / (3 * scale)) ** 2 + torch.log(1 + torch.exp(-2 * (a * eps) / (3 * scale) ** 2))
    """),
    # vdvae's discretised logistic: the double where, its floor in a helper named for it.
    ("NG501", """\
        def log_probs(x, cdf_delta, log_pdf_mid):
            return torch.where(cdf_delta > 1e-5, torch.log(const_max(cdf_delta, 1e-12)), log_pdf_mid - np.log(127.5))
    """),
    # decision-transformer's attention: the scale is a Python number (`k.size(-1)`), no gradient.
    ("NG501", """\
        def forward(self, q, k, T):
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float('-inf'))
            return F.softmax(att, dim=-1)
    """),
    # RecBole's FiGNN: self-loops masked out of a graph attention with an identity mask.
    ("NG701", """\
        def forward(self, alpha):
            mask = torch.eye(self.num_fields).to(alpha.device)
            alpha = alpha.masked_fill(mask.bool(), float("-inf"))
            return F.softmax(alpha, dim=-1)
    """),
    # RecBole's log loss: the ceiling `1 - eps` is named through `eps`.
    ("NG201", """\
        def metric_info(preds, trues):
            eps = 1e-15
            preds = np.float64(preds)
            preds = np.clip(preds, eps, 1 - eps)
            return np.sum(-trues * np.log(preds) - (1 - trues) * np.log(1 - preds)) / len(preds)
    """),
    # mmpretrain's ArcFace head: the where's acos is the one NG303 reports two lines up.
    ("NG501", """\
        def logits(self, pre_logits):
            cosine = F.normalize(pre_logits) @ F.normalize(self.weight).t()
            phi = torch.cos(torch.acos(cosine) + self.margins)
            return torch.where(cosine > 0, phi, cosine)
    """),
    # DomainBed's contrastive loss: the ratio's NaN is tested on the next line and skipped.
    ("NG401", """\
        def loss(pairwise, pos_in, pos_out):
            total, nans = 0.0, 0
            for i in range(pairwise.shape[1]):
                a, b = pairwise[pos_in], pairwise[pos_out]
                num_positives = a.shape[0] + b.shape[0]
                loss_i = torch.sum(torch.log(torch.cat((a[:, i], b[:, i])))) / num_positives
                if torch.isnan(loss_i):
                    nans += 1
                    continue
                total -= loss_i
            return total
    """),
    # DeBERTa's XSoftmax: the masked entries are refilled with 0 in place after the softmax.
    ("NG701", """\
        def forward(self, input, mask, dim):
            rmask = ~(mask.bool())
            output = input.masked_fill(rmask, float("-inf"))
            output = torch.softmax(output, dim)
            output.masked_fill_(rmask, 0)
            return output
    """),
    # mdlm's SEDD parameterisation: where the discarded expm1 overflows, the kept exp(s) - 1 does too.
    ("NG501", """\
        def _sedd_parameterization(self, logits, xt, sigma):
            return torch.where(sigma < 0.5, torch.expm1(sigma), sigma.exp() - 1).log()
    """),
    # timesfm's evaluation: a running total of whole batch sizes is 0 only for an empty dataset.
    ("NG401", """\
        def evaluate(eval_itr, model):
            mse_run_losses = []
            num_elements = 0
            for batch in eval_itr:
                actuals = batch[3]
                mse_run_losses.append(((model(batch[0]) - actuals) ** 2).sum())
                num_elements += actuals.shape[0] * actuals.shape[1]
            return np.sum(mse_run_losses) / num_elements
    """),
    # CoinCheung's large-margin softmax: a one-hot mask fills one entry per row, the others survive.
    ("NG701", """\
        def forward(ctx, logits, labels, lam=0.3):
            idx = torch.zeros_like(logits).scatter_(1, labels.unsqueeze(1), 1.)
            lgts = logits.clone()
            lgts[idx.bool()] = -torch.inf
            q = lgts.softmax(dim=1)
            return q
    """),
    ("NG701", """\
        def complement(logits, labels):
            keep = F.one_hot(labels, logits.size(-1)).bool()
            return logits.masked_fill(~keep, float("-inf")).softmax(-1)
    """),
    # hgcn's Möbius matvec: the clamped norm is never 0 (its floor an attribute set in __init__),
    # and the curvature's own zero has nothing to do with the where's `mx == 0`.
    ("NG501", """\
        class PoincareBall(Manifold):
            def __init__(self):
                super().__init__()
                self.min_norm = 1e-15

            def mobius_matvec(self, m, x, c):
                sqrt_c = c ** 0.5
                mx = x @ m.transpose(-1, -2)
                mx_norm = mx.norm(dim=-1, keepdim=True, p=2).clamp_min(self.min_norm)
                res_c = torch.tanh(mx_norm) * mx / (mx_norm * sqrt_c)
                cond = (mx == 0).prod(-1, keepdim=True, dtype=torch.uint8)
                return torch.where(cond, torch.zeros(1), res_c)
    """),
    # RepDistiller's PKT: the KL ratio (p + eps) / (q + eps) is positive, so p·log(ratio) is 0 at p = 0.
    ("NG201", PKT_LOSS.format(ratio="(target_similarity + eps) / (model_similarity + eps)")),
    # SAM's metrics: the ratio is cleaned with nan_to_num by the next statement (an empty mask gives 0).
    ("NG401", """\
        def top_k_error_rate_metric(logits, one_hot_labels, k=5, mask=None):
            mask = mask.reshape([logits.shape[0]])
            hit = jax.vmap(jnp.isin)(jnp.argmax(one_hot_labels, -1), jnp.argsort(logits, axis=-1)[:, -k:])
            error_rate = 1 - ((hit * mask).sum() / mask.sum())
            # Set to zero if there is no non-masked samples.
            return jnp.nan_to_num(error_rate)
    """),
    # blackjax's log1mexp: x is held at or below -eps first, so exp(x) < 1 and log1p(-exp(x)) is finite.
    ("NG501", """\
        def log1mexp(x):
            x = jnp.minimum(x, -jnp.finfo(x.dtype).eps)
            return jnp.where(x > -0.6931472, jnp.log(-jnp.expm1(x)), jnp.log1p(-jnp.exp(x)))
    """),
    ("NG501", """\
        def log1mexp(x):
            x = torch.clamp(x, -100.0, -1e-7)
            return torch.where(x > -0.6931472, torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))
    """),
    # entmax's and TabNet's sparsemax threshold: the support (method-form cumsum of the sorted
    # input) holds the largest entry.
    ("NG401", """\
        def _threshold_and_support(input, dim=-1):
            input_srt, _ = torch.sort(input, descending=True, dim=dim)
            input_cumsum = input_srt.cumsum(dim) - 1
            rhos = _make_ix_like(input, dim)
            support = rhos * input_srt > input_cumsum
            support_size = support.sum(dim=dim).unsqueeze(dim)
            tau = input_cumsum.gather(dim, support_size - 1)
            tau /= support_size.to(input.dtype)
            return tau, support_size
    """),
    # tensorflow-addons' sparsemax: the same support through `tf.math.cumsum` of the top-k values.
    ("NG401", """\
        def _compute_2d_sparsemax(logits, obs, dims):
            z_sorted, _ = tf.nn.top_k(logits, k=dims)
            z_cumsum = tf.math.cumsum(z_sorted, axis=-1)
            k = tf.range(1, tf.cast(dims, logits.dtype) + 1, dtype=logits.dtype)
            z_check = 1 + k * z_sorted > z_cumsum
            k_z = tf.math.reduce_sum(tf.cast(z_check, tf.int32), axis=-1)
            tau_sum = tf.gather_nd(z_cumsum, k_z)
            return (tau_sum - 1) / tf.cast(k_z, logits.dtype)
    """),
    # pytorch-forecasting's softplus_inv: expm1 of -(y + eps) overflows as y -> -inf, which the
    # where keeps; the discarded y > 20 is finite.
    ("NG501", """\
        def softplus_inv(y):
            finfo = torch.finfo(y.dtype)
            return y.where(y > 20.0, y + (y + finfo.eps).neg().expm1().neg().log())
    """),
    # gluonts' generalized Pareto mean: NaN on purpose where it is undefined.
    ("NG501", """\
        def mean(self):
            return torch.where(self.xi < 1, torch.div(self.beta, 1 - self.xi), np.nan * torch.ones_like(self.xi))
    """),
    # gluonts' discrete distribution: the support of a probability vector is never empty.
    ("NG401", """\
        def rps(self, obs):
            probs_sorted, values_sorted = self.probs_sorted, self.values_sorted
            mask_non_zero_prob = (probs_sorted > 0).int()
            quantile_losses = mask_non_zero_prob * self.quantile_losses(obs, quantiles=values_sorted)
            return torch.sum(quantile_losses, dim=-1) / torch.sum(mask_non_zero_prob, dim=-1)
    """),
    # sentence-transformers' reranking metrics: the count returned early when 0 floors the max.
    ("NG401", """\
        def compute_metrics(self, y_true, y_pred, num_positives=None):
            num_retrieved_positives = sum(y_true)
            if num_retrieved_positives == 0:
                return 0, 0, 0
            num_positives = max(num_positives or 0, num_retrieved_positives)
            return average_precision_score(y_true, y_pred) * (num_retrieved_positives / num_positives)
    """),
    # Pyraformer's and Informer's StandardScaler: fit gets a NumPy array (its statistics are later
    # passed to torch.from_numpy), whose std divides by n.
    ("NG801", """\
        class StandardScaler():
            def fit(self, data):
                self.mean = data.mean(0)
                self.std = data.std(0)

            def transform(self, data):
                mean = torch.from_numpy(self.mean).type_as(data) if torch.is_tensor(data) else self.mean
                std = torch.from_numpy(self.std).type_as(data) if torch.is_tensor(data) else self.std
                return (data - mean) / std
    """),
    # uni2ts' packed loss: the observation counts are made of mask parameters and torch.eq
    # comparisons; no gradient reaches 1 / nobs.
    ("NG501", """\
        def reduce_loss(self, loss, prediction_mask, observed_mask, sample_id, variate_id):
            id_mask = torch.logical_and(torch.eq(sample_id.unsqueeze(-1), sample_id.unsqueeze(-2)),
                                        torch.eq(variate_id.unsqueeze(-1), variate_id.unsqueeze(-2)))
            nobs = reduce(id_mask * rearrange(prediction_mask, "... seq -> ... 1 seq"), "... s1 s2 -> ... s1 1", "sum")
            nobs = torch.where(nobs == 0, nobs, 1 / nobs).sum()
            return (loss * nobs).sum()
    """),
    # tensorflow_graphics' slerp: the dot product comes from a helper named for the bound it keeps.
    ("NG303", """\
        def _quaternion_weights(q1, q2, eps):
            dot_product = _safe_dot(tf.nn.l2_normalize(q1, axis=-1), tf.nn.l2_normalize(q2, axis=-1), eps)
            return tf.acos(dot_product)
    """),
    # trl's GRPO metrics: a completion masked to nothing gives NaN on purpose, which every caller
    # of the helper skips with nanmin/nanmax.
    ("NG401", CLIP_RATIOS),
    # flash-linear-attention's reference attention: a strict comparison of two index ranges masks
    # the future and never the diagonal.
    ("NG701", """\
        def attn(q, k, v):
            T = q.shape[-2]
            scores = q @ k.transpose(-1, -2)
            row_idx = torch.arange(T, device=q.device).unsqueeze(-1)
            col_idx = torch.arange(T, device=q.device).unsqueeze(0)
            mask = col_idx > row_idx
            scores = scores.masked_fill(mask, float('-inf'))
            return scores.softmax(-1) @ v
    """),
    ("NG701", """\
        def attn(q, k, v):
            idx = torch.arange(q.shape[-2])
            scores = (q @ k.transpose(-1, -2)).masked_fill(idx[None, :] > idx[:, None], float('-inf'))
            return scores.softmax(-1) @ v
    """),
    # fast-soft-sort's log-add-exp: the min of two values minus their max is <= 0.
    ("NG104", """\
        def log_add_exp(x, y):
            larger = jnp.maximum(x, y)
            smaller = jnp.minimum(x, y)
            return larger + jnp.log1p(jnp.exp(smaller - larger))
    """),
    # GPflow's Fourier features: a tail exp(-|x - a| / lengthscales) is at most 1 where discarded.
    ("NG501", """\
        def kuf(X, a, b, kernel, Kuf_cos):
            left_tail = tf.exp(-tf.abs(X - a) / kernel.lengthscales)[None, :]
            return tf.where(X < a, left_tail, Kuf_cos)
    """),
    # GPflow's Poisson likelihood: the log of a bin size set once from the constructor.
    ("NG201", """\
        class Poisson:
            def __init__(self, binsize=1.0):
                self.binsize = np.array(binsize, dtype=np.float64)

            def expectations(self, Fmu, Fvar, Y):
                return tf.reduce_sum(Y * Fmu - tf.exp(Fmu + Fvar / 2) * self.binsize
                                     + Y * tf.math.log(self.binsize), axis=-1)
    """),
    # open_spiel's best response: the ratio is written only to the entries the count counts, so
    # with none selected nothing is written.
    ("NG401", """\
        def best_response(y, dist):
            s = np.linalg.norm(y, ord=np.inf)
            br = np.zeros_like(dist)
            maxima = (y == s)
            br[maxima] = 1. / maxima.sum()
            return br
    """),
    # open_spiel's ESCHER: a game state where a player acts has at least one legal action.
    ("NG401", """\
        def uniform_policy(state):
            mask = np.array(state.legal_actions_mask(), dtype=int)
            return mask / np.sum(mask)
    """),
    ("NG401", """\
        class TabularPolicy:
            def reset(self):
                self.action_probability_array = (
                    self.legal_actions_mask / np.sum(self.legal_actions_mask, axis=-1, keepdims=True))
    """),
    # tf-keras' KL divergence: both sides clipped to [epsilon, 1] on the lines before the log.
    ("NG201", """\
        def kld(y_true, y_pred):
            y_pred = tf.convert_to_tensor(y_pred)
            y_true = tf.cast(y_true, y_pred.dtype)
            y_true = tf.clip_by_value(y_true, tf.keras.backend.epsilon(), 1.)
            y_pred = tf.clip_by_value(y_pred, tf.keras.backend.epsilon(), 1.)
            return tf.reduce_sum(y_true * tf.math.log(y_true / y_pred), axis=-1)
    """),
    # flair's CRF: the maximum subtracted under another name, reshaped.
    ("NG105", LOG_SUM_EXP),
    # box voting: an assertion that every count is positive runs before the division.
    ("NG401", BOX_VOTING),
    # stanza's windowed attention: a buffer made by flipping a registered triangle.
    ("NG701", FLIPPED_BUFFER),
    # PyTensor's softplus: exp only runs in a branch that keeps x below 18.
    ("NG104", """\
        def softplus(x):
            if x < -37.0:
                return np.exp(x)
            elif x < 18.0:
                return np.log1p(np.exp(x))
            return x
    """),
    ("NG104", """\
        def softplus(x):
            if x > 18.0:
                return x
            else:
                return np.log1p(np.exp(x))
    """),
    # Model Garden's expert-choice routing metrics: every axis of a one-hot summed counts the
    # indices, and the token count is a product of the input's sizes.
    ("NG401", """\
        def routing_metrics(router_probs, expert_index, combine_array):
            num_groups = tf.shape(router_probs)[0]
            tokens_per_group = router_probs.shape[1]
            dispatch_mask = tf.one_hot(expert_index, tokens_per_group, axis=1)
            num_tokens = num_groups * tokens_per_group
            left = 1.0 - tf.cast(tf.reduce_sum(tf.reduce_max(dispatch_mask, axis=(-1, -2))), tf.float32) \\
                / tf.cast(num_tokens, tf.float32)
            confidence = tf.math.reduce_sum(combine_array) / tf.math.reduce_sum(dispatch_mask)
            return left, confidence
    """),
    # salina's episodes: positions up to an argmax always keep position 0.
    ("NG401", SALINA_EPISODES),
    # mmaction2's HVU loss: a category no sample is tagged with is skipped (`< 0.5`) first.
    ("NG401", HVU_LOSS),
    # Pointcept's per-batch masks and habitat's samples per environment: a tensor compared with
    # its own distinct values counts at least one of each.
    ("NG401", PER_BATCH_MASKS),
    ("NG401", SAMPLES_PER_ENV),
    # CORL's dataset statistics: NumPy's std of a parameter annotated `np.ndarray` divides by n.
    ("NG801", MEAN_STD.format(annotation="np.ndarray")),
    ("NG801", MEAN_STD.format(annotation="Optional[jax.Array]")),
    # CORL's calibration rates: `x == x` counts every entry of x that is not NaN.
    ("NG401", BOUND_RATE),
    # PyMARL's learners: the steps an episode batch stored count its first step, always.
    ("NG401", STORED_STEPS),
    # pymarl2's LICA learner: the mask copied, and cut to the steps before the last.
    ("NG401", "    import copy\n" + STORED_STEPS.replace("return (masked_td_error ** 2).sum() / mask.sum()",
                                   "entropy_mask = copy.deepcopy(mask)\n"
                                   "        return (masked_td_error * entropy_mask).sum() / entropy_mask.sum()")),
    ("NG401", STORED_STEPS.replace('mask = batch["filled"][:, :-1].float()', 'mask = batch["filled"].float()')
     .replace("td_error = chosen", "mask = mask[:, :-1]\n        td_error = chosen")),
    # mmrotate's ground-truth geometry: corners unpacked from, or edges built from, the targets
    # alone carry no gradient.
    ("NG302", GT_EDGES),
    ("NG302", GT_GAUSSIAN),
    # CornerNet's focal loss: the size of what the mask selects is checked; AlphaPose's keypoint
    # match: too few keypoints return first; DAVIS' Jaccard index: both parts of the union checked.
    ("NG401", CORNER_FOCAL),
    ("NG401", KEYPOINT_MATCH),
    ("NG401", JACCARD),
    ("NG401", JACCARD_NP),
    # PartialReID's evaluation distance: tensors made from NumPy arrays are leaves without grad.
    ("NG302", DSR_DISTANCE),
    # d2l's anchor assignment: a division by n inside `for _ in range(n)` runs only for n >= 1.
    ("NG401", ANCHOR_LOOP),
    # Craftax's textures: positions taken from range() are Python ints, outside autodiff.
    ("NG302", RANGE_TEXTURE),
    # ViTPose's candidate matching: of `d_min, idx = dist.min(-1)` only d_min carries a gradient,
    # and it is only compared.
    ("NG302", NEAREST_MATCH),
    # DI-engine's football features: a nested helper called only with NumPy arrays.
    ("NG302", NUMPY_DISTANCE),
    # deepchem's PPO entropy: `prob += machine_eps` keeps the probability off 0.
    ("NG201", PPO_ENTROPY),
    # deepchem's MAT attention: a score divided by math.sqrt(d_k) divides every entry alike.
    ("NG501", SCALED_SCORES),
    # InternVL's packed dataset: a ratio only compared (NaN compares False, no NaN is kept).
    ("NG401", ACTIVE_RATIO),
    # StyleGAN2-ADA's augment pipe (mmagic): random parameters scaled by a float hyperparameter.
    ("NG501", AUGMENT_PIPE),
    # mmagic's SinGAN: the RMSE only read through `.item()` inside the append.
    ("NG302", NOISE_WEIGHT),
    # InternVL's retrieval loss: every rank's ids, this rank's own too, so each row matches itself.
    ("NG401", GATHERED_IDS),
    # mmhuman3d's normal visibility: `coords_len` is a Euclidean length, not a count.
    ("NG401", NORMAL_VISIBILITY),
    # EasyRec's JRC loss: samples of one session compared with every sample, itself included.
    ("NG401", SESSION_CONTEXT),
    # AutoGluon's log losses: a ceiling of `1 - eps` (a clip, or a minimum) keeps `1 - p` off 0.
    ("NG201", CLIPPED_LOG_LOSS),
    ("NG201", BOUNDED_LOG_LOSS),
    # AutoGluon's F-measure: the intersection is checked, and it is at most either count.
    ("NG401", ADAPTIVE_FM),
    # GeoDiff's bond angles: `length_prod` is a product of norms, not a count (NG303 reports the acos).
    ("NG401", BOND_ANGLE),
    # SciPy's Hermite nodes: a value over the square root of a number is not a cosine.
    ("NG303", HERMITE_START),
    # OpenCompass' toxicity: every score NaN raises first, so some score counts.
    ("NG401", TOXICITY_SCORES),
    # self-critical.pytorch's criteria: a column of ones (the first token) leads every row.
    ("NG401", REWARD_CRITERION),
    ("NG401", REWARD_CRITERION.replace("mask.new(mask.size(0), 1).fill_(1)", "mask.new_full((mask.size(0), 1), 1)")),
    # deepchem's MXMNet: distances between a batch's input positions, which carry no gradient.
    ("NG302", BATCH_POSITIONS),
    # packnet-sfm's evaluation: a function named for its metrics reports them, nothing differentiates it.
    ("NG302", DEPTH_METRICS),
    # TS-TCC's copy of vit-pytorch's attention: the mask is built only from one given, and no
    # call of the module gives one (`for attn, ff in self.layers`, layers appended in `__init__`).
    ("NG701", VIT_MASKED_ATTENTION),
    # Informer-style attention: None stands for a causal mask, and the module passes None (the
    # attention built by the caller, `EncoderLayer(FullAttention(True))`).
    ("NG701", INFORMER_ATTENTION),
    # A decoder whose blocks are called through a named method (`layer.forward_with_attention(x,
    # mask)`, the blocks appended to a list in `__init__`), with the causal mask it builds.
    ("NG701", DECODER_BLOCKS),
    # A function named for evaluation reports, nothing differentiates it.
    ("NG302", DEPTH_METRICS.replace("compute_depth_metrics", "evaluate_depth")),
    ("NG302", DEPTH_METRICS.replace("compute_depth_metrics", "validation_step")),
    # audio2photoreal's Gaussian kernel over a linspace grid, its width a number when not given.
    ("NG901", GAUSSIAN_KERNEL),
]

# DIG's SphereNet: the distance along each edge of a graph, 0 only on an edge from an atom to
# itself; whether the graph has one is the caller's (a radius graph has none).
EDGE_DISTANCE = """\
    def xyz_to_dat(pos, edge_index, num_nodes):
        j, i = edge_index
        dist = (pos[i] - pos[j]).pow(2).sum(dim=-1).sqrt()
        return dist
"""


POSITIVES = [
    # ... a product with an odd power of an unknown factor has no sign; a PSNR loss is a loss.
    ("NG901", """\
        def weights(x, y, s):
            h = np.exp(-(x * x + y * y) / (2.0 * s * s * s))
            return h / h.sum()
    """),
    ("NG302", """\
        def psnr_loss(tar_img, prd_img):
            rmse = ((prd_img - tar_img) ** 2).mean().sqrt()
            return -20 * torch.log10(1 / rmse)
    """),
    # ... a product of two masks is a mask (DiffCSE's replaced tokens: none were replaced), and
    # count_nonzero counts whatever it is given (cornac's BEACON: a row without positives).
    ("NG401", """\
        def electra_acc(prediction, e_labels, attention_mask):
            rep = (e_labels == 1) * attention_mask
            return float((prediction * rep).sum() / rep.sum())
    """),
    ("NG401", """\
        def pos_weight(y):
            nb_pos = torch.count_nonzero(y, dim=1)
            nb_neg = torch.count_nonzero(1 - y, dim=1)
            return nb_neg.float() / nb_pos.float()
    """),
    # ... the same model passing its caller's padding mask: the caller's, a finding.
    ("NG701", EVA_BLOCKS.replace('x = blk(x, rel_pos_bias=None)', 'x = blk(x, rel_pos_bias=None, attn_mask=pad_mask)')),
    # ... a mask unpacked from another call may cover a whole row.
    ("NG701", DETR_SEGMENTATION.replace('features[-1].decompose()', 'features[-1].split_mask()')),
    # ... the same map set to 1 (masked) over the windows keeps nothing there.
    ("NG701", LOCAL_CONSTRAINT.replace('max_len)] = 0\n', 'max_len)] = 1\n')),
    # ... the same weight also used elsewhere reaches every entry.
    ("NG401", ANCHOR_WEIGHTS.replace('bbox_outside_weights[labels == 0, :] = negative_weights\n', 'bbox_outside_weights[labels == 0, :] = negative_weights\n        bbox_outside_weights += positive_weights\n')),
    # ... the complement of an identity is empty for a batch of one.
    ("NG401", """\
        def fenchel_dual_loss(E_neg, N):
            n_mask = 1 - torch.eye(N).cuda()
            return (E_neg * n_mask).sum() / n_mask.sum()
    """),
    # ... a function passed as the loss too is differentiated.
    ("NG302", """\
        import tensorflow.keras.backend as K

        def root_mean_square_error(s_true, s_pred):
            return K.sqrt(K.mean(K.pow(s_true - s_pred, 2)))

        def build(model):
            model.compile(optimizer="adam", loss=root_mean_square_error, metrics=[root_mean_square_error])
    """),
    # ... a cosine over a temperature is not bounded enough (1 / 0.05 = 20), nor are distances.
    ("NG103", """\
        def tempered(a, b):
            loss = -torch.log(1 - torch.sigmoid(torch.cosine_similarity(a, b) / 0.05)).sum()
            loss.backward()
    """),
    ("NG102", """\
        def coe_loss(u, i, j):
            loss = -torch.log(torch.sigmoid(torch.norm(u - j, dim=1) - torch.norm(u - i, dim=1))).sum()
            loss.backward()
    """),
    # ... a NaN test that only asserts repairs nothing.
    ("NG701", """\
        def attention(scores, mask):
            scores = scores.masked_fill(~mask, float('-inf'))
            attn = torch.softmax(scores, dim=1)
            assert not torch.isnan(attn).any()
            return attn
    """),
    # ... a kernel whose exponent takes data (a parameter an op reduces, or one multiplying the
    # grid) still overflows or underflows: exp(-d**2) of large distances is 0/0.
    ("NG901", """\
        def soft_assign(d, sigma):
            w = torch.exp(-torch.sum(d ** 2, dim=-1) / (2 * sigma ** 2))
            return w / w.sum()
    """),
    ("NG901", """\
        def sized_by_data(x):
            n = int(x.shape[0])
            e = torch.exp(x * torch.arange(n))
            return e / e.sum()
    """),
    ("NG901", """\
        def scaled_grid(x, n):
            e = torch.exp(x * torch.arange(n))
            return e / e.sum()
    """),
    ("NG901", """\
        def halves(x):
            a, b = torch.split(x, 2)
            e = torch.exp(a)
            return e / e.sum()
    """),
    # ... a torch scaler (nothing turns its statistics back from NumPy) fitted on a batch of one.
    ("NG801", """\
        class UnitGaussianNormalizer(object):
            def __init__(self, x, eps=0.00001):
                self.mean = torch.mean(x, 0)
                self.std = torch.std(x, 0)
    """),
    # ... counts weighted by a parameter that is not a mask can carry a gradient.
    ("NG501", """\
        def reduce_loss(loss, weights, sample_id):
            same = torch.eq(sample_id.unsqueeze(-1), sample_id.unsqueeze(-2))
            nobs = (same * weights).sum(-1)
            return (loss * torch.where(nobs == 0, nobs, 1 / nobs)).sum()
    """),
    # ... the same branch discarded for y < -20: there -(y + eps) grows and expm1 overflows.
    ("NG501", """\
        def f(y):
            finfo = torch.finfo(y.dtype)
            return y.where(y < -20.0, y + (y + finfo.eps).neg().expm1().neg().log())
    """),
    # ... a count of independent sigmoid outputs above a threshold can be 0.
    ("NG401", """\
        def rate(scores, logits):
            hits = (torch.sigmoid(logits) > 0.5).float()
            return (hits * scores).sum() / hits.sum()
    """),
    # ... a max of counts nobody tested against 0.
    ("NG401", """\
        def compute_metrics(y_true, y_pred, num_positives=None):
            num_retrieved_positives = (y_true > 0).sum()
            num_positives = max(num_positives or 0, num_retrieved_positives)
            return torch.sum(y_pred * y_true) / num_positives
    """),
    # ... a ratio printed before nan_to_num cleans it is printed as NaN.
    ("NG401", """\
        def error_rate(logits, labels, mask):
            rate = ((jnp.argmax(logits, -1) == labels) * mask).sum() / mask.sum()
            print(rate)
            return jnp.nan_to_num(rate)
    """),
    # ... log1mexp without the clamp: exp(x) rounds to 1 for |x| < 6e-8.
    ("NG501", """\
        def log1mexp(x):
            return jnp.where(x > -0.6931472, jnp.log(-jnp.expm1(x)), jnp.log1p(-jnp.exp(x)))
    """),
    # ... a clamp whose ceiling is above 0 leaves x = 0, where exp(x) is 1.
    ("NG501", """\
        def log1mexp(x):
            x = x.clamp(max=1.0)
            return torch.where(x > -0.6931472, torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))
    """),
    # ... the cumsum of something unsorted does not hold the largest entry first.
    ("NG401", """\
        def threshold(scores, dim=-1):
            cs = scores.cumsum(dim) - 1
            support = scores > cs
            n = support.sum(dim=dim)
            return cs.sum(dim) / n
    """),
    # ... Graphormer's KDE probabilities exp(-d²/T) underflow to 0 on top of the ratio: 0·log 0.
    ("NG201", """\
        def kl(self, rmsds, ref_probs):
            self_probs = torch.exp(-rmsds ** 2 / self.temperature)
            return torch.sum(self_probs * torch.log(self_probs / (ref_probs + 1e-32)), axis=1)
    """),
    # ... without the eps on top, the ratio is 0 where p is: 0·log 0.
    ("NG201", PKT_LOSS.format(ratio="target_similarity / (model_similarity + eps)")),
    # ... ones scattered into a padding mask (not into zeros) can still fill a row.
    ("NG701", """\
        def forward(scores, pad, idx):
            m = pad.scatter(1, idx, True)
            return scores.masked_fill(m, float("-inf")).softmax(-1)
    """),
    # ... the norm left unclamped is 0 where the where discards it: 0/0 in the gradient.
    ("NG501", """\
        def mobius_matvec(m, x, c):
            sqrt_c = c ** 0.5
            mx = x @ m.transpose(-1, -2)
            mx_norm = mx.norm(dim=-1, keepdim=True, p=2)
            res_c = mx / (mx_norm * sqrt_c)
            cond = (mx == 0).prod(-1, keepdim=True, dtype=torch.uint8)
            return torch.where(cond, torch.zeros_like(res_c), res_c)
    """),
    # ... a floor attribute that another method changes is not known positive.
    ("NG501", """\
        class Ball(nn.Module):
            def __init__(self):
                super().__init__()
                self.min_norm = 1e-15

            def set_floor(self, v):
                self.min_norm = v

            def matvec(self, m, x):
                mx = x @ m
                mx_norm = mx.norm(dim=-1, keepdim=True).clamp_min(self.min_norm)
                return torch.where(mx == 0, torch.zeros_like(mx), mx / mx_norm)
    """),
    # ... a tensor's scale is differentiated: `1 / norm` where the mask discards it is still a risk.
    ("NG501", """\
        def forward(self, q, k, lengths):
            norm = k.norm(dim=-1, keepdim=True)
            att = (q @ k.transpose(-2, -1)) * (1.0 / norm)
            return att.masked_fill(norm == 0, 0.0)
    """),
    # ... the softplus story: the kept branch `x` stays finite where the discarded exp overflows.
    ("NG501", "y = torch.where(x < 20, torch.log1p(torch.exp(x)), x)\n"),
    # ... a padding mask of the same shape can fill a row.
    ("NG701", """\
        def forward(self, alpha, pad):
            mask = pad.to(alpha.device)
            alpha = alpha.masked_fill(mask.bool(), float("-inf"))
            return F.softmax(alpha, dim=-1)
    """),
    # ... a ceiling named through a parameter is not known to be below 1.
    ("NG201", """\
        def metric_info(preds, trues, eps):
            preds = np.clip(preds, eps, 1 - eps)
            return np.sum(-trues * np.log(preds) - (1 - trues) * np.log(1 - preds)) / len(preds)
    """),
    # ... and the where's acos is reported where nothing else reports it.
    ("NG501", """\
        def logits(self, cosine):
            cosine = cosine.clamp(-1, 1)
            phi = torch.cos(torch.acos(cosine) + self.margins)
            return torch.where(cosine > 0, phi, cosine)
    """),
    # ... a NaN tested but then used anyway is not handled.
    ("NG401", """\
        def loss(pairwise, pos_in, pos_out):
            total = 0.0
            for i in range(pairwise.shape[1]):
                a, b = pairwise[pos_in], pairwise[pos_out]
                num_positives = a.shape[0] + b.shape[0]
                loss_i = torch.sum(torch.log(torch.cat((a[:, i], b[:, i])))) / num_positives
                if torch.isnan(loss_i):
                    print("nan")
                total -= loss_i
            return total
    """),
    # ... a refill on another condition leaves a fully masked row NaN.
    ("NG701", """\
        def forward(self, input, mask, keep, dim):
            rmask = ~(mask.bool())
            output = input.masked_fill(rmask, float("-inf"))
            output = torch.softmax(output, dim)
            output.masked_fill_(~keep, 0)
            return output
    """),
    # ... a binary cross-entropy's log(1 - p) evaluated at p = 1, where the where discards it.
    ("NG501", "y = torch.where(p < 1, torch.log1p(-p), torch.zeros_like(p))\n"),
    # tensorflow-probability's log1mexp, with and without x = |x|: exp(-x) rounds to 1 for
    # 0 < x < 6e-8, where the discarded log1p(-exp(-x)) is -inf and the kept log(-expm1(-x)) is
    # finite (-18.4 at x = 1e-8): a NaN gradient there (the overflow of exp(-x) for x < -88 is
    # not the reason: the kept branch is NaN there too).
    ("NG501", """\
        def log1mexp(x):
            x = tf.convert_to_tensor(x, name='x')
            x = tf.math.abs(x)
            return tf.where(x < np.log(2), tf.math.log(-tf.math.expm1(-x)), tf.math.log1p(-tf.math.exp(-x)))
    """),
    ("NG501", """\
        def log1mexp(x):
            x = tf.convert_to_tensor(x, name='x')
            return tf.where(x < np.log(2), tf.math.log(-tf.math.expm1(-x)), tf.math.log1p(-tf.math.exp(-x)))
    """),
    # ... a running total grown by the size of a selection is 0 whenever nothing is selected.
    ("NG401", """\
        def evaluate(loader, model):
            losses = []
            num_elements = 0
            for x, mask in loader:
                losses.append((model(x) * mask).sum())
                num_elements += len(x[mask])
            return np.sum(losses) / num_elements
    """),
    # ... and a helper that only computes a dot product bounds nothing.
    ("NG303", """\
        def angle(a, b):
            dot_product = _dot(F.normalize(a, dim=-1), F.normalize(b, dim=-1))
            return torch.acos(dot_product)
    """),
    ("NG501", """\
        def _mean(self):
            concentration = tf.convert_to_tensor(self.concentration)
            mean = self.scale / (concentration - 1.)
            return tf.where(concentration > 1., mean, dtype_util.as_numpy_dtype(self.dtype)(0.))
    """),
    ("NG501", "y = torch.where(c > 1, s / (c - 1), torch.full_like(c, 0.0))\n"),
    # A public helper the module never calls may be differentiated by anyone: still reported.
    ("NG501", "def sinc(t):\n    return torch.where(t == 0, 1.0, torch.sin(t) / t)\n"),
    # ... and so is one that the module also calls in differentiated code.
    ("NG501", """\
        def sinc(t):
            return torch.where(t == 0, 1.0, torch.sin(t) / t)

        def kernel(n):
            with torch.no_grad():
                k = sinc(torch.linspace(-n, n, 2 * n))
            return k

        class Layer(nn.Module):
            def forward(self, x):
                return sinc(self.scale * x)
    """),
    # A nested helper called on the function's own (differentiable) argument.
    ("NG501", """\
        def mel(x):
            def hz_to_mel(freq):
                return torch.where(freq >= 1000.0, torch.log(freq / 1000.0), freq / 66.7)
            return hz_to_mel(x)
    """),
    # The custom-gradient function's caller is differentiated as usual.
    ("NG501", """\
        @tf.custom_gradient
        def clip_grad(x):
            return tf.identity(x), lambda dy: tf.clip_by_norm(dy, 1.0)

        def loss(x):
            return tf.where(x > 0, tf.math.log(clip_grad(x)), 0.0)
    """),
    # forward of a module (not an autograd.Function), and a float-annotated parameter that is
    # not the singular input.
    ("NG501", """\
        class Net(nn.Module):
            def forward(self, x, cutoff: float):
                return torch.where(x > cutoff, x, torch.log1p(torch.exp(x)))
    """),
    ("NG501", """\
        def in_bounds(x, loc, scale, concentration):
            return tf.where(concentration > 0., x / concentration, x)
    """),
    ("NG501", """\
        def t_power(logu, t):
            fu = tf.math.expm1(t * logu)
            return tf.where((0 < t) & (t < 1), -fu, 2. * logu)
    """),
    ("NG501", """\
        def _one_step(self, results, smoothing, target, error_sum, step_size):
            step = tf.cast(results.step, smoothing.dtype) + 1.
            new_log_step = target + error_sum * step
            return tf.where(step < results.num_adaptation_steps, tf.math.exp(new_log_step), step_size)
    """),
    ("NG501", """\
        def cumulative_variance(x, fix):
            excl_counts = tf.range(tf.shape(x)[0], dtype=x.dtype)
            discrepancies = (tf.cumsum(x, exclusive=True) / excl_counts - x)**2
            if fix:
                discrepancies = tf.where(excl_counts == 0, x**2, discrepancies)
            return tf.where(~tf.equal(excl_counts, 0), discrepancies, 0)
    """),
    ("NG104", "r = 1.0 / np.log(1 + np.exp(x))\n"),
    # tensorflow-addons' monotonic attention: the probability function is bound with
    # functools.partial in __init__ and called by the layer later, differentiated.
    ("NG501", """\
        def _monotonic_probability_fn(score, previous_alignments):
            return tf.where(score > 0, tf.math.log(score), 0.0)

        class BahdanauMonotonicAttention(AttentionMechanism):
            def __init__(self, units, mode="parallel"):
                wrapped_probability_fn = functools.partial(_monotonic_probability_fn)
                super().__init__(probability_fn=wrapped_probability_fn)
    """),
    # a closure made in __init__ runs in forward
    ("NG501", """\
        def softplus(x):
            return torch.where(x > 20, x, torch.log1p(torch.exp(x)))

        class Act(nn.Module):
            def __init__(self):
                super().__init__()
                self.f = lambda x: softplus(x)
    """),
    # a helper a no-grad builder returns is called later, anywhere
    ("NG501", """\
        def make():
            def act(x):
                return torch.where(x > 20, x, torch.log1p(torch.exp(x)))
            return act

        class Net(nn.Module):
            @torch.no_grad()
            def build(self):
                self.act = make()
    """),
    # the compared value is the denominator, or a factor of every term of it
    ("NG501", "def iou(inter, union):\n    return tf.where(tf.equal(union, 0.0), 0.0, tf.truediv(inter, union))\n"),
    ("NG501", """\
        def iou(inter, a, b):
            union = a * inter + b * inter
            return tf.where(tf.equal(inter, 0.0), tf.zeros_like(inter), tf.truediv(a, union))
    """),
    # a Gram matrix in NumPy: the diagonal rounds negative for ordinary data
    ("NG301", "d = np.sqrt(sq[:, None] + sq[None, :] - 2 * x @ x.T)\n"),
    ("NG105", """\
        def logsumexp(self, dim):
            if self.numel() == 0:
                return self.sum(dim)
            return torch.sum(torch.exp(self), dim).log()
    """),
    ("NG105", """\
        def logsumexp(self, other, dim):
            if other.numel() == 0:
                return torch.sum(torch.exp(self), dim).log()
            return self.sum(dim)
    """),
    # The risks next to the session 2026-12-06 negatives stay findings.
    ("NG303", """\
        def angle(a, b):
            return torch.acos(torch.sum(a * b) / (torch.norm(a) * torch.norm(b)))
    """),
    ("NG501", """\
        def more_stable_sigmoid(x):
            return jnp.where(x < -9, jnp.exp(x), jax.nn.sigmoid(x))
    """),
    ("NG501", """\
        def scaled(z, scale):
            return jnp.where(z > 20.0, z, jnp.log1p(jnp.exp(z / scale)))
    """),
    ("NG501", """\
        def bfind(eig, w):
            g2 = jnp.sum(eig * w, axis=0)
            return jnp.where(jnp.linalg.norm(eig, axis=0) != 0, 1 / g2, 0.0)
    """),
    ("NG201", """\
        def entropy(probs):
            return -(probs * jnp.log(probs)).sum(axis=-1)
    """),
    ("NG302", """\
        def rmse_loss(pred, y):
            rmse = torch.sqrt(F.mse_loss(pred, y))
            print(f"RMSE: {rmse:.2f}")
            return rmse
    """),
    ("NG901", """\
        def weights(q):
            w = jnp.exp(q)
            return w / jnp.sum(w, axis=0, keepdims=True)
    """),
    ("NG501", """\
        def _select_initial_step(d1, d2, h0, order):
            max_d = jnp.maximum(d1, d2)
            return jnp.where(max_d <= 1e-15, jnp.maximum(1e-6, h0 * 1e-3), (0.01 / max_d) ** (1 / order))

        class Controller:
            def init(self, d1, d2, h0, order):
                dt0 = _select_initial_step(d1, d2, h0, order)
                return dt0 * 2
    """),
    ("NG501", """\
        def masked_mean(array, mask, axis):
            summed = jnp.sum(array * mask, axis=axis)
            counts = jnp.sum(mask, axis=axis)
            return jnp.where(jnp.equal(counts, 0.), summed, summed / counts)
    """),
    ("NG801", """\
        class Loss(nn.Module):
            def forward(self, input, target):
                if target.size(0) > 1:
                    print("batch")
                return (input - input.mean(0)) / input.std(0).add(1e-6)
    """),
    ("NG401", """\
        def masked_mean(x, valid):
            return (x * valid).sum(dim=1) / valid.sum(dim=1)
    """),
    ("NG104", """\
        def log_sum_exp(a, b):
            if a >= b:
                return a + torch.log(1 + torch.exp(a - b))
            return b
    """),
    ("NG401", """\
        def percent(prev_mask, x):
            prev_dead_count = jnp.count_nonzero(prev_mask)
            return jnp.sum(x) / prev_dead_count if x is not None else 0.0
    """),
    ("NG501", """\
        def inverse_dcg(scores, gain_fn):
            discounted_gain = tf.reduce_sum(gain_fn(scores), axis=1, keepdims=True)
            return tf.compat.v1.where(tf.greater(discounted_gain, 0.), 1. / discounted_gain,
                                      tf.zeros_like(discounted_gain))
    """),
    ("NG501", """\
        def rgb_to_lab(xyz_normalized):
            power = torch.pow(xyz_normalized, 1 / 3.0)
            return torch.where(xyz_normalized > 0.008856, power, 7.787 * xyz_normalized)
    """),
    ("NG104", """\
        def normalize_term(n, logits):
            return n * logits.abs().exp().log1p()
    """),
    ("NG901", """\
        def sinkhorn(out, eps):
            Q = torch.exp(out / eps)
            Q /= torch.sum(Q)
            return Q
    """),
    ("NG302", """\
        def patch_loss(cand_points, targets):
            patch_dist = torch.sqrt(torch.sum((cand_points - targets) ** 2, dim=-1))
            keep = patch_dist < 3.0
            return patch_dist[keep].mean()
    """),
    ("NG401", """\
        def mean_over(x, mask):
            n = mask.sum()
            return x.sum() / n
    """),
    ("NG401", """\
        def newton_girard(e_n, s_k, max_degree):
            out = []
            for deg in range(0, max_degree + 1):
                out.append((e_n[:deg] * s_k[:deg]).sum(dim=-1) / deg)
            return out
    """),
    ("NG501", """\
        def inverse(x):
            return jnp.where(x < .5, .5 / (1 - x), 2 * x)
    """),
    ("NG201", """\
        def entropy(p):
            return -torch.sum(p * torch.log(p))
    """),
    ("NG701", """\
        def attention(qk, padding_mask):
            qk = qk.masked_fill(padding_mask.unsqueeze(2).to(torch.bool), float("-inf"))
            return F.softmax(qk, dim=-1)
    """),
    ("NG501", """\
        def nonlinear(module, inputs, outputs, grad_in, grad_out, eps: float = 1e-10):
            delta_in, delta_out = _compute_diffs(inputs, outputs)
            return torch.where(abs(delta_in) < eps, grad_in, grad_out * delta_out / delta_in)
    """),
    ("NG701", """\
        def attention_ref(scores, v, local_mask, key_padding_mask):
            scores.masked_fill_(local_mask, float("-inf"))
            attention = torch.softmax(scores, dim=-1).to(v.dtype)
            attention = attention.masked_fill(~key_padding_mask[:, None, None, :], 0.0)
            return attention
    """),
    ("NG501", """\
        def se2_log(theta, z_real, z_imag):
            denom = z_real - 1
            return torch.where(denom != 0, -(0.5 * theta * z_imag) / denom, torch.tensor(0.0))
    """),
    ("NG102", """\
        def logsig(x):
            return torch.log(torch.sigmoid(x))
    """),
    ("NG104", """\
        x = torch.tensor([0., 1., 100.], requires_grad=True)
        y = x.exp().log1p()
    """),
    ("NG401", """\
        def masked_mean(x, mask):
            return torch.sum(x * mask, dim=1) / len(x[mask])
    """),
    ("NG701", """\
        def suppress(logits, banned):
            logits[banned] = -torch.inf
            return torch.nn.functional.log_softmax(logits.float(), dim=-1)
    """),
    ("NG304", """\
        def power_normalise(z):
            return tf.sqrt(tf.nn.relu(z)) - tf.sqrt(tf.nn.relu(-z))
    """),
    # The same shapes where the value is kept: a distance that goes on into the loss, a value
    # read again by the next loop iteration, a nested helper whose result is returned.
    ("NG302", """\
        def loss_dist(pts, target):
            coord_diff = pts[..., None, :] - pts[..., None, :, :]
            d = torch.sqrt(torch.sum(coord_diff ** 2, dim=-1))
            close = d < 4.0
            return ((d - target) ** 2 * close).mean()
    """),
    ("NG302", """\
        def loop_carried(pts, n):
            total = 0
            prev = None
            for i in range(n):
                if prev is not None:
                    total = total + prev
                prev = torch.sqrt(torch.sum((pts[i] - pts[0]) ** 2, dim=-1))
                if (prev < 1).any():
                    break
            return total
    """),
    ("NG302", """\
        def nested_used(points):
            def distances(p):
                d = p[..., None, :] - p[..., None, :, :]
                return torch.sqrt(torch.sum(d ** 2, dim=-1))
            return distances(points).mean()
    """),
    ("NG401", """\
        def renormalise(probs, keep_mask):
            probs_masked = probs * keep_mask
            return probs_masked / torch.sum(probs_masked, dim=-1, keepdim=True)
    """),
    ("NG401", """\
        def uniform(n, mask):
            return jnp.ones((n,)) / jnp.sum(mask)
    """),
    # A Gram-expansion distance clamped at 0 in place of itself: the clamp hides the NaN value,
    # not the infinite gradient of the root at 0 (issue 28's "clamp before the Gram sqrt").
    ("NG301", """\
        def distance_matrix(x):
            sq = (x * x).sum(1)
            d = sq[:, None] + sq[None, :] - 2 * x @ x.t()
            d = torch.clamp(d, min=0.0)
            return torch.sqrt(d)
    """),
    ("NG302", """\
        def distance_matrix(x):
            d = (x[:, None] - x[None]).pow(2).sum(-1)
            d = d.clamp(min=0)
            return d.sqrt()
    """),
    ("NG302", """\
        def frame_loss(coord, mask, target):
            dist_mat = ((coord[:, mask][:, None, :, :] - coord[:, mask][:, :, None, :]) ** 2).sum(-1) ** 0.5
            indices = torch.sort(dist_mat, axis=2).indices
            return (dist_mat.gather(2, indices) - target).abs().mean()
    """),
    ("NG501", """\
        class GraphNorm(nn.Module):
            def forward(self, adj):
                deg = torch.sum(adj, dim=0)
                deg_inv = torch.where(deg > 0, 1. / torch.sqrt(deg), torch.zeros(deg.size()))
                return torch.mm(torch.diag(deg_inv), torch.mm(adj, torch.diag(deg_inv)))
    """),
    ("NG401", """\
        def compute_loss(losses, targets, ignore_index):
            valid = targets != ignore_index
            return losses.sum() / (targets != ignore_index).sum()
    """),
    ("NG401", """\
        def tangent(x, x_dot, threshold):
            primal_out = project(x)
            supp = primal_out > threshold
            card = jnp.count_nonzero(supp)
            return supp * x_dot - (jnp.dot(supp, x_dot) / card) * supp
    """),
    ("NG401", """\
        def forward_kl(x, labels, ignore_index):
            mask = (labels != ignore_index).int()
            return -torch.sum(x * mask.view(-1), dim=0) / torch.sum(mask.view(-1), dim=0)
    """),
    ("NG701", """\
        def sample(logits, threshold):
            logits = torch.where(logits < threshold, -float("Inf"), logits)
            return torch.nn.functional.softmax(logits, dim=-1)
    """),
    # an index chosen from another tensor can point at an underflowed probability
    ("NG101", """\
        def picked(logits, other, y):
            probs = torch.softmax(logits, -1)
            _, idx = other.max(1)
            return probs[torch.arange(len(y)), idx].log()
    """),
    ("NG104", """\
        def kl(log_variance, mean):
            log_alpha = log_variance - tf.math.log(tf.square(mean) + 1e-7)
            log_alpha = tf.clip_by_value(log_alpha, log_alpha, 8.)
            return tf.reduce_sum(-0.5 * tf.math.log1p(tf.exp(-log_alpha)))
    """),
    # TF1: the cost goes to `minimize` and `sess.run`, which differentiate it; that the fetched
    # value is then only printed does not end its gradient.
    ("NG302", """\
        x = tf.placeholder(tf.float32, [None, 784])
        y = tf.placeholder(tf.float32, [None, 10])
        W = tf.Variable(tf.zeros([784, 10]))
        pred = tf.nn.softmax(tf.matmul(x, W))
        d = tf.sqrt(tf.reduce_sum(tf.square(pred - y), 1))
        cost = tf.reduce_mean(d)
        optimizer = tf.train.GradientDescentOptimizer(0.1).minimize(cost)
        with tf.Session() as sess:
            _, c = sess.run([optimizer, cost], feed_dict={})
            print(c)
    """),
    # a soft F1 *loss* is differentiated, and mixed precision is not a metric
    ("NG501", """\
        def soft_f1_loss(precision, recall):
            return 1 - tf.where(tf.greater(precision + recall, 0), 2 * ((precision * recall) / (precision + recall)), 0)
    """),
    ("NG501", """\
        def mixed_precision_ratio(a, b):
            return torch.where(b > 0, a / b, 0.0)
    """),
    ("NG104", """\
        def log_prob(z, loc, scale):
            a = torch.abs(z[:, 0])
            eps = torch.tensor(loc)
            return torch.log(1 + torch.exp(-2 * (a * eps) / (3 * scale) ** 2))
    """),
    # `torch.max(s, 1)` is a reduction over dimension 1, not a floor at 1
    ("NG501", """\
        def f(s):
            return torch.where(s > 0, torch.log(torch.max(s, 1)[0]), 0.0)
    """),
    # ... but one caller that takes a plain mean of the helper's NaN keeps the finding.
    ("NG401", CLIP_RATIOS.replace('["high_max"].append(torch.nanmax(masked_seq_mean(high.float())).item())',
                                  '["high_mean"].append(masked_seq_mean(high.float()).mean().item())')),
    # ... positions compared with lengths can mask a whole row (a length of 0) ...
    ("NG701", """\
        def attn(q, k, v, lengths):
            idx = torch.arange(q.shape[-2])
            scores = (q @ k.transpose(-1, -2)).masked_fill(idx[None, :] >= lengths[:, None], float('-inf'))
            return scores.softmax(-1) @ v
    """),
    # ... and a range starting at 1 masks all of row 0.
    ("NG701", """\
        def attn(q, k, v):
            T = q.shape[-2]
            col = torch.arange(1, T + 1)[None, :]
            row = torch.arange(T)[:, None]
            scores = (q @ k.transpose(-1, -2)).masked_fill(col > row, float('-inf'))
            return scores.softmax(-1) @ v
    """),
    # ... but a value that is not among the max's operands can exceed it.
    ("NG104", """\
        def log_add_exp(x, y, z):
            larger = jnp.maximum(x, z)
            return larger + jnp.log1p(jnp.exp(y - larger))
    """),
    # ... a class prior set from the constructor is a probability vector, which can hold a 0.
    ("NG201", """\
        class PriorLoss:
            def __init__(self, prior):
                self.prior = torch.tensor(prior)

            def forward(self, target):
                return -(target * torch.log(self.prior)).sum(-1).mean()
    """),
    # ... but written to the complement of the selection it lands somewhere ...
    ("NG401", """\
        def spread(y):
            x = np.zeros_like(y)
            m = y > 0
            x[~m] = 1.0 / m.sum()
            return x
    """),
    # ... and acme's mask, computed from a threshold on the action values, is only named legal.
    ("NG401", """\
        def dither(action_values, threshold):
            legal_actions_mask = tf.where(tf.math.less_equal(action_values, threshold),
                                          tf.fill(tf.shape(action_values), 0.), tf.fill(tf.shape(action_values), 1.))
            return 1 / tf.reduce_sum(legal_actions_mask, axis=-1, keepdims=True) * legal_actions_mask
    """),
    # ... with only the prediction clipped, a target 0 is 0·log(0) = NaN.
    ("NG201", """\
        def kld(y_true, y_pred):
            y_true = tf.cast(y_true, y_pred.dtype)
            y_pred = tf.clip_by_value(y_pred, tf.keras.backend.epsilon(), 1.)
            return tf.reduce_sum(y_true * tf.math.log(y_true / y_pred), axis=-1)
    """),
    # ... a mean subtracted under another name is no maximum.
    ("NG105", LOG_SUM_EXP.replace("m, _ = torch.max(tensor, dim)", "mu = tensor.mean(dim)")
               .replace("= m.", "= mu.").replace("return m +", "return mu +")),
    # ... an assertion on the scores says nothing of the count.
    ("NG401", BOX_VOTING.replace("tf.greater(num_matches, 0)", "tf.greater_equal(scores, 0)")),
    # ... a buffer made from a registered padding mask is no triangle.
    ("NG701", FLIPPED_BUFFER.replace("torch.tril(torch.ones(window, window), diagonal=-1)", "pad")),
    # ... a bound above exp's overflow point, or a name changed inside the branch, is no guard.
    ("NG104", """\
        def softplus(x):
            if x < 100.0:
                return np.log1p(np.exp(x))
            return x
    """),
    ("NG104", """\
        def softplus(x):
            if x < 18.0:
                x = x * 100
                return np.log1p(np.exp(x))
            return x
    """),
    # ... a one-hot summed over the batch counts one class, which a batch can lack.
    ("NG401", """\
        def class_means(x, labels, C):
            class_mask = tf.one_hot(labels, C)
            return tf.reduce_sum(x, 0) / tf.reduce_sum(class_mask, axis=0)
    """),
    # ... a slice of the index range no longer starts at 0 ...
    ("NG701", """\
        def attn(q, k, v):
            idx = torch.arange(q.shape[-2])
            scores = (q @ k.transpose(-1, -2)).masked_fill(idx[1:][None, :] > idx[:-1][:, None], float('-inf'))
            return scores.softmax(-1) @ v
    """),
    # ... and a mask of the illegal actions is no legal-action mask.
    ("NG401", """\
        def spread(state):
            illegal_mask = np.array(state.illegal_actions_mask(), dtype=int)
            return illegal_mask / np.sum(illegal_mask)
    """),
    # ... positions strictly before it keep nothing when the episode ends at step 0.
    ("NG401", SALINA_EPISODES.replace("mask.le(length)", "mask.lt(length)")),
    # ... and positions counted from 1 keep nothing when the episode ends at step 0.
    ("NG401", SALINA_EPISODES.replace("torch.arange(T)", "torch.arange(1, T + 1)")),
    # ... a threshold above 1 lets a count of 0 through.
    ("NG401", HVU_LOSS.replace("< 0.5", "> 2")),
    # ... the distinct values of another tensor can be missing from this one.
    ("NG401", PER_BATCH_MASKS.replace("batch.unique()", "other_ids.unique()")),
    ("NG401", SAMPLES_PER_ENV.replace("torch.unique(environment_ids", "torch.unique(other_ids")),
    # ... pandas' std, like torch's, divides by n - 1 ...
    ("NG801", MEAN_STD.format(annotation="pd.DataFrame")),
    ("NG801", MEAN_STD.format(annotation="torch.Tensor")),
    # ... and a comparison with another tensor can select nothing.
    ("NG401", BOUND_RATE.replace("lower_bounds == lower_bounds", "lower_bounds == targets")),
    # ... the termination mask applied at step 0 too, or steps taken from 1 on, can count none.
    ("NG401", STORED_STEPS.replace("mask[:, 1:] = mask[:, 1:] *", "mask[:, :] = mask[:, :] *")),
    ("NG401", STORED_STEPS.replace('batch["filled"][:, :-1]', 'batch["filled"][:, 1:]')),
    ("NG401", STORED_STEPS.replace('mask = batch["filled"][:, :-1].float()', 'mask = batch["filled"].float()')
     .replace("td_error = chosen", "mask = mask[:, 1:]\n        td_error = chosen")),
    # ... a name that is a mask still is one: `valid_tgt`, `srcMask`, `invalid`, `non_pad_mask`.
    ("NG401", ALIGNMENT_SCORES.replace("valid_alignment", "valid_tgt")),
    ("NG401", ALIGNMENT_SCORES.replace("valid_alignment", "srcMask")),
    ("NG401", ALIGNMENT_SCORES.replace("valid_alignment", "non_pad_mask")),
    ("NG401", ALIGNMENT_SCORES.replace("valid_alignment", "masked_weight")),
    ("NG401", """\
        def ratio(x, invalid):
            return x.sum() / (~invalid).sum()
    """),
    # ... a cache branch that slices the columns from 1 drops the key each row kept ...
    ("NG701", KV_CACHE_MASK.replace("[self.ptr:self.ptr + num_q, :num_k]", "[self.ptr:self.ptr + num_q, 1:num_k]")),
    # ... a call of this module that passes a padding mask, or no mask, is the caller's choice ...
    ("NG701", PASSED_CAUSAL_MASK.replace("x = block(x, mask, 0)", "x = block(x, mask, 0)\n            x = self.blocks[0](x, x == 0, 0)")),
    ("NG701", PASSED_CAUSAL_MASK.replace("return x + self.att(x, mask, cos)", "return x + self.att(x, pad, cos)").replace(
        "def forward(self, x, mask, cos):\n            return", "def forward(self, x, mask, cos, pad=None):\n            return")),
    # ... and keys that do not start at 0 can all lie after a query.
    ("NG701", POSITION_MASK.replace("torch.arange(keys.shape[-2])", "torch.arange(ptr, ptr + keys.shape[-2])")),
    # ... ties for the maximum of another tensor can be none ...
    ("NG401", TIED_FOR_MAX.replace("tf.reduce_max(abs_grad,", "tf.reduce_max(other,").replace(
        "def l1_step(grad, red_ind):", "def l1_step(grad, red_ind, other):")),
    # ... and a gradient made to be differentiated (a gradient penalty) is.
    ("NG501", """\
        def penalty(D, interp):
            g = torch.autograd.grad(D(interp).sum(), interp, create_graph=True)[0]
            n = g.abs().sum(dim=1)
            return torch.where(n > 0, 1 / n, n).mean()
    """),
    # ... counts taken where another tensor is not 0 can be 0.
    ("NG401", NONZERO_COUNTS.replace("(num_relevant != 0)", "(labels.max(-1).values != 0)")),
    # ... an edge list with self-loops added reaches the zero vector ...
    ("NG302", EDGE_DISTANCE.replace("j, i = edge_index", "j, i = add_self_loops(edge_index)[0]")),
    ("NG302", EDGE_DISTANCE.replace("j, i = edge_index", "j, i = radius_graph(pos, r=5.0, loop=True)")),
    # ... and so do every pair of a range with itself and a broadcast pairwise difference.
    ("NG302", """\
        def all_pairs(x):
            n = x.shape[0]
            return [torch.sqrt(((x[i] - x[j]) ** 2).sum()) for i in range(n) for j in range(n)]
    """),
    ("NG302", EDGE_DISTANCE.replace("pos[i] - pos[j]", "pos[:, None] - pos[None, :]")),
    ("NG302", EDGE_DISTANCE.replace("pos[i] - pos[j]", "pos[:, [1]] - pos[:, [0]]")),
    # ... the same geometry of predicted boxes is differentiated.
    ("NG302", GT_EDGES.replace("gt_rbboxes", "pred_rbboxes")),
    ("NG302", GT_GAUSSIAN.replace("target", "pred")),
    # ... the other selection's size, a threshold above, one part of the union only: 0 passes.
    ("NG401", CORNER_FOCAL.replace("pos_pred.nelement() == 0", "neg_pred.nelement() == 0")),
    ("NG401", KEYPOINT_MATCH.replace("mask.sum() < 2", "mask.sum() > 2")),
    ("NG401", JACCARD.replace(" and fg_mask.sum() == 0", "")),
    # ... the same distance of a model's features is differentiated.
    ("NG302", DSR_DISTANCE.replace("torch.FloatTensor(array1[i])", "array1[i]")),
    # ... a loop over another range runs whatever the divisor.
    ("NG401", ANCHOR_LOOP.replace("range(num_gt_boxes)", "range(num_anchors)")),
    # ... a position passed in may be a traced, differentiated value.
    ("NG302", RANGE_TEXTURE.replace("(size: int)", "(size: int, x)").replace(" for x in range(2 * size)", "")),
    # ... the nearest distance returned (a loss term) is differentiated.
    ("NG302", NEAREST_MATCH.replace("return cand2gt", "return cand2gt, min_dist.mean()")),
    # ... the same distance of a tensor passed in is differentiated.
    ("NG302", NUMPY_DISTANCE.replace("def get_features(obs):", "def get_features(obs, both_team):")
     .replace('        both_team = np.array(obs["left_team"] + obs["right_team"], dtype=np.float32)\n', "")),
    # ... a probability scaled in place is still 0 where it was.
    ("NG201", PPO_ENTROPY.replace("prob += machine_eps", "prob *= machine_eps")),
    # ... a score divided by a norm is singular where the norm is 0.
    ("NG501", SCALED_SCORES.replace("math.sqrt(d_k)", "query.norm(dim=-1, keepdim=True)")),
    # ... the ratio returned is 0/0 for a sample without labels.
    ("NG401", ACTIVE_RATIO.replace("return (1 - num_ignore_tokens / num_tokens) > min_active_tokens_ratio",
                                   "return 1 - num_ignore_tokens / num_tokens")),
    # ... a learned scale carries a gradient.
    ("NG501", AUGMENT_PIPE.replace("self.scale_std = float(scale_std)",
                                   "self.scale_std = nn.Parameter(torch.tensor(scale_std))")),
    # ... the RMSE itself returned (to be differentiated).
    ("NG302", NOISE_WEIGHT.replace("rmse.item())", "rmse)\n            return rmse")),
    # ... ids gathered from another tensor need not meet these.
    ("NG401", GATHERED_IDS.replace("GatherLayer.apply(image_ids)", "GatherLayer.apply(text_ids)")
     .replace("(image_ids, sim_t2i)", "(image_ids, text_ids, sim_t2i)")),
    # ... a length that counts a mask is 0 when nothing is selected.
    ("NG401", NORMAL_VISIBILITY.replace("torch.sqrt(torch.sum(coords_masked ** 2, dim=1))", "(coords_masked > 0).sum(1)")),
    # ... samples compared with another session's ids may meet none.
    ("NG401", SESSION_CONTEXT.replace("tf.expand_dims(session_ids, 0)", "tf.expand_dims(other_ids, 0)")
     .replace("(labels, session_ids, l_pos)", "(labels, session_ids, other_ids, l_pos)")),
    # ... a floor alone leaves `1 - p` at 0 for p = 1.
    ("NG201", CLIPPED_LOG_LOSS.replace("np.clip(y_pred.astype(float), eps, 1 - eps)", "np.maximum(y_pred, eps)")),
    ("NG201", BOUNDED_LOG_LOSS.replace("np.minimum(1 - eps, np.maximum(eps, prediction))", "np.maximum(eps, prediction)")),
    # ... without the check, an empty prediction is 0/0.
    ("NG401", ADAPTIVE_FM.replace("if area_intersection == 0:", "if beta == 0:")),
    # ... the acos of a dot product over norms held in a name is a cosine's.
    ("NG303", BOND_ANGLE),
    # ... and so is one over the root of a sum of squares.
    ("NG303", HERMITE_START.replace("mu = np.sqrt(2.0 * n + 1.0)", "mu = np.sqrt(np.sum(x_initial * x_initial))")),
    # ... without the test, every score invalid is 0 counted.
    ("NG401", TOXICITY_SCORES.replace("np.isnan(toxicity_scores).all()", "toxicity_scores.size == 0")),
    # ... a method the class calls with two other tensors measures identical points too.
    ("NG302", EGNN_LAYERS.replace("self.edge_model(x[row], x[col], edge_attr)", "self.edge_model(x, edge_attr, edge_attr)")),
    # ... a column of zeros leaves a row of padding empty.
    ("NG401", REWARD_CRITERION.replace("fill_(1)", "fill_(0)")),
    # ... unless the module differentiates with respect to them (forces from an energy).
    ("NG302", BATCH_POSITIONS.replace("pos = pyg_batch.pos", "pos = pyg_batch.pos.requires_grad_()")),
    # ... the same RMSE named as a loss is differentiated.
    ("NG302", DEPTH_METRICS.replace("compute_depth_metrics", "compute_depth_loss")),
    # ... a mask passed in by the model's caller may leave a row empty.
    # ... options unpacked into the call (not a wrapper's own `**kwargs`) may hold a mask.
    ("NG701", VIT_MASKED_ATTENTION.replace("x = attn(x, mask=mask)", "x = attn(x, **self.attn_options)")),
    ("NG701", VIT_MASKED_ATTENTION.replace("    def forward(self, x):\n            return self.transformer(x)",
                                           "    def forward(self, x, mask):\n            return self.transformer(x, mask=mask)")),
    ("NG701", INFORMER_ATTENTION.replace("    def forward(self, x):\n            return self.layer(x)",
                                         "    def forward(self, x, pad_mask):\n            return self.layer(x, attn_mask=pad_mask)")),
    # ... a mask the decoder's caller passes may leave a row empty.
    ("NG701", DECODER_BLOCKS.replace("def forward(self, x):\n            mask = torch.triu(torch.ones(x.shape[1], x.shape[1]), diagonal=1).bool()",
                                     "def forward(self, x, mask):")),
    # ... a width the caller must pass may be data (a tiny std underflows every entry).
    ("NG901", GAUSSIAN_KERNEL.replace("def gaussian_kernel(ksize, std=None):", "def gaussian_kernel(ksize, std):")),
]


@pytest.mark.parametrize("code,body", NEGATIVES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(NEGATIVES)])
def test_harmless_in_context_is_not_a_finding(code, body):
    assert code not in _codes(body, "all"), f"{code} should not fire on:\n{body}"


@pytest.mark.parametrize("code,body", POSITIVES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(POSITIVES)])
def test_the_risk_kept_is_still_a_default_finding(code, body):
    assert code in _codes(body), f"{code} should fire on:\n{body}"


def test_a_name_overwritten_before_the_where_is_read_as_its_last_value():
    # tensorflow-probability's cumulative_variance: the first where is the real 0/0 at index 0;
    # by the second, `discrepancies` holds the fixed value, not the division it replaced.
    body = textwrap.dedent("""\
        def cumulative_variance(x, sample_axis=0):
            excl_counts = tf.range(tf.shape(x)[0], dtype=x.dtype)
            incl_counts = excl_counts + 1
            excl_sums = tf.cumsum(x, axis=sample_axis, exclusive=True)
            discrepancies = (excl_sums / excl_counts - x)**2
            discrepancies = tf.where(excl_counts == 0, x**2, discrepancies)
            adjustments = excl_counts / incl_counts
            adjusted = tf.where(~tf.equal(excl_counts, 0), adjustments * discrepancies, 0)
            return tf.cumsum(adjusted, axis=sample_axis)
    """)
    lines = [f.line - HEADER.count("\n") for f in lint_source(HEADER + body) if f.code == "NG501"]
    assert lines == [6]


# Findings whose risk depends on the data: reported with --confidence all, not by default.
POSSIBLE_ONLY = [
    # Bayes by backprop's sigma, and softplus of other learned weights: 88 only if training
    # drives the weight there (as NG106's log-scales).
    ("NG104", """\
        class BayesLinear(Base):
            def forward(self, x):
                sigma_weight = torch.log1p(torch.exp(self.rho_weight))
                return x @ (self.mu_weight + sigma_weight * torch.randn_like(sigma_weight))
    """),
    ("NG104", """\
        class Radial(nn.Module):
            def __init__(self):
                super().__init__()
                self.beta = nn.Parameter(torch.empty(1))

            def forward(self, z):
                return torch.log(1 + torch.exp(self.beta)) * z
    """),
    # DIG's SphereNet and DimeNet's gathered positions: distances along a graph's edges.
    ("NG302", textwrap.dedent(EDGE_DISTANCE)),
    ("NG302", """\
        def calculate_interatomic_distances(R, idx_i, idx_j):
            Ri = tf.gather(R, idx_i)
            Rj = tf.gather(R, idx_j)
            return tf.sqrt(tf.nn.relu(tf.reduce_sum((Ri - Rj)**2, -1)))
    """),
    # jumanji's search-and-rescue: a count held by an object the
    # environment owns (set by its other code, like `self.num_items`).
    ("NG401", """\
        def _state_to_observation(self, state):
            return 1.0 - jnp.sum(state.targets.found) / self.generator.num_targets
    """),
    # fairseq-style reduce_metrics: the sum of what the logging outputs recorded, also when the
    # name is reused for each task (SpeechT5's criterion).
    ("NG401", """\
        def reduce_metrics(logging_outputs_dict):
            if "s2t" in logging_outputs_dict:
                logs = logging_outputs_dict["s2t"]
                ntokens = sum(log.get("ntokens", 0) for log in logs)
                nll_loss_sum = torch.stack([log["nll_loss"] for log in logs]).sum()
                metrics.log_scalar("s2t_nll_loss", nll_loss_sum / ntokens / math.log(2), ntokens)
            if "bart" in logging_outputs_dict:
                logs = logging_outputs_dict["bart"]
                ntokens = sum(log.get("ntokens", 0) for log in logs)
                bart_loss_sum = torch.stack([log["bart_loss"] for log in logs]).sum()
                metrics.log_scalar("bart_nll_loss", bart_loss_sum / ntokens / math.log(2), ntokens)
    """),
    # LPCNet's encoder: a count from the command line (or a config) is the user's setting.
    ("NG401", """\
        def quantizer_ids(args, q0, q1):
            return q1 + (q0 - q1) * np.arange(args.num_redundancy_frames // 2) / args.num_redundancy_frames
    """),
    ("NG401", """\
        def per_layer(total_loss, cfg):
            return total_loss.sum() / cfg.data.num_items
    """),
    # transformers' openfold residue constants: the law of cosines on a table of bond lengths
    # and angles. Elementwise, a² + b² - 2ab·cos g is exactly 0 at a == b, g == 0 and rounds
    # negative only for nearly equal inputs.
    ("NG301", """\
        def make_bond_length(bond1, bond2, gamma):
            return np.sqrt(bond1.length**2 + bond2.length**2 - 2 * bond1.length * bond2.length * np.cos(gamma))
    """),
    # e3_diffusion's EGNN layers: distances along the edges a base class gathers
    # (`self.edge_model(x[row], x[col], ...)`), and a difference rebound after its use; 0 only
    # on an edge from a node to itself, as DIG's.
    ("NG302", EGNN_LAYERS),
]


@pytest.mark.parametrize("code,body", POSSIBLE_ONLY, ids=[f"{c}-{i}" for i, (c, _) in enumerate(POSSIBLE_ONLY)])
def test_data_dependent_risks_are_possible_not_certain(code, body):
    assert code in _codes(body, "all")
    assert code not in _codes(body), f"{code} should not be in the default set:\n{body}"


def test_string_annotations_are_read_and_bad_ones_ignored():
    # `cutoff: "float"` is a Python number; an annotation that does not parse is no evidence.
    good = "def k(cutoff: 'float', n: int):\n    t = cutoff * torch.arange(n)\n" \
           "    return torch.where(t == 0, 1.0, torch.sin(t) / t)\n"
    bad = "def k(cutoff: 'float[', n: int):\n    t = cutoff * torch.arange(n)\n" \
          "    return torch.where(t == 0, 1.0, torch.sin(t) / t)\n"
    assert "NG501" not in _codes(good, "all")
    assert "NG501" in _codes(bad)


PUBLIC_HELPERS = [
    # the same shapes with public names: another module may call them with a differentiated
    # tensor (meta-learning through an optimizer's functional update, a public sinc), so how
    # this module happens to call them proves nothing
    textwrap.dedent("""\
        import torch

        def sinc(t):
            return torch.where(t == 0, torch.tensor(1., device=t.device, dtype=t.dtype), torch.sin(t) / t)

        def kernel_upsample2(zeros=56):
            t = torch.linspace(-zeros + 0.5, zeros - 0.5, 2 * zeros)
            return sinc(t)
    """),
    textwrap.dedent("""\
        import torch

        class Lamb(torch.optim.Optimizer):
            @torch.no_grad()
            def step(self, closure=None):
                trust_ratio(self.w, self.g)

        def trust_ratio(w_norm, g_norm):
            return torch.where(g_norm > 0, w_norm / g_norm, 1.0)
    """),
]


@pytest.mark.parametrize("body", PUBLIC_HELPERS, ids=["sinc", "trust_ratio"])
def test_a_public_function_keeps_its_finding_whoever_calls_it_here(body):
    assert [f.code for f in lint_source(body)] == ["NG501"]
