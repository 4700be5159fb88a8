"""End-to-end coreference by span ranking (Lee et al. 2017, the paper's coreference baseline).

One document segment at a time (its S sentences as the S rows of the batch): a BiLSTM over
each sentence, every span of up to `max_span_width` words within a sentence represented by
its end points' states, an attention-weighted head over its words and a width embedding;
a mention score per span; the best `top_span_ratio` * N spans kept (N words); each kept span
scored against its `max_antecedents` nearest earlier kept spans and the dummy antecedent
(score 0: not a mention, or the first of its cluster), with same-speaker, genre and distance
features; trained on the marginal log-likelihood of its gold antecedents, plus a
mention loss (whether each candidate span is a gold mention: Zhang et al. 2018), without
which a small data set never brings the gold spans among the kept ones.

Reduced for two CPU cores: one hidden layer per scorer, contextual states (not the input
embeddings) under the head attention, no rule against crossing spans.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from elmo.tasks.coref_data import GENRES
from elmo.tasks.encoder import EncoderConfig, WordEncoder

DISTANCE_BUCKETS = (1, 2, 3, 4, 5, 8, 16, 32, 64)  # antecedent offsets from each lower bound


@dataclass
class CorefConfig(EncoderConfig):
    num_layers: int = 1
    max_span_width: int = 10  # words
    top_span_ratio: float = 0.4  # spans kept per word of the segment
    max_antecedents: int = 50  # earlier kept spans each kept span is scored against
    ffnn_dim: int = 150
    feature_dim: int = 20  # width, speaker, genre and distance embeddings

    @property
    def span_dim(self) -> int:
        return 3 * self.output_dim + self.feature_dim


@dataclass
class CorefScores:
    """A segment's kept spans (in order of start, then end) and their antecedents' scores."""

    starts: torch.Tensor  # (k,) word offsets in the segment
    ends: torch.Tensor  # (k,) inclusive
    antecedents: torch.Tensor  # (k, A) index of each candidate in the kept spans
    scores: torch.Tensor  # (k, 1 + A): column 0 the dummy antecedent, -inf where none
    candidates: torch.Tensor  # (C, 2) start and end of every candidate span
    mention: torch.Tensor  # (C,) their mention scores


def ffnn(in_dim: int, hidden: int, dropout: float) -> nn.Sequential:
    """in_dim -> hidden (ReLU, dropout) -> one score."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(hidden, 1))


def candidate_spans(sentence_of: torch.Tensor, max_width: int) -> tuple[torch.Tensor,
                                                                         torch.Tensor]:
    """(starts, ends) of every span of at most `max_width` words inside one sentence, ordered
    by start then end; `sentence_of` (N,) gives each word's sentence."""
    n = sentence_of.shape[0]
    starts = torch.arange(n, device=sentence_of.device).unsqueeze(1).expand(n, max_width)
    ends = starts + torch.arange(max_width, device=sentence_of.device)  # (N, W)
    inside = (ends < n) & (sentence_of[starts] == sentence_of[ends.clamp(max=n - 1)])
    return starts[inside], ends[inside]  # (C,), (C,)


def distance_bucket(offsets: torch.Tensor) -> torch.Tensor:
    """The bucket of each offset >= 1 (1, 2, 3, 4, 5-7, 8-15, 16-31, 32-63, 64+)."""
    bounds = torch.tensor(DISTANCE_BUCKETS[1:], device=offsets.device)
    return torch.bucketize(offsets, bounds, right=True)


def gold_cluster(spans: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """1 + the gold cluster number of each (start, end) span (n, 2), 0 for a span that is no
    gold mention; `gold` (M, 3): start, end, cluster."""
    match = ((spans[:, :1] == gold[:, 0]) & (spans[:, 1:] == gold[:, 1]))  # (n, M)
    return torch.where(match.any(1), gold[:, 2][match.long().argmax(1)] + 1, 0)


class CorefModel(nn.Module):
    """Mention and antecedent scores for the spans of one segment."""

    def __init__(self, config: CorefConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = WordEncoder(config)
        d, f = config.output_dim, config.feature_dim
        self.head_attention = nn.Linear(d, 1)
        self.width = nn.Embedding(config.max_span_width, f)
        self.mention = ffnn(config.span_dim, config.ffnn_dim, config.dropout)
        self.same_speaker = nn.Embedding(2, f)
        self.genre = nn.Embedding(len(GENRES) + 1, f)
        self.distance = nn.Embedding(len(DISTANCE_BUCKETS), f)
        self.antecedent = ffnn(3 * config.span_dim + 3 * f, config.ffnn_dim, config.dropout)

    def forward(self, word_ids, mask, elmo_input=None, elmo_output=None, speakers=None,
                genre=None) -> CorefScores:
        """(S, T) ids and mask of a segment's sentences, ELMo (S, T, D) or None, `speakers`
        (1, N) a speaker number per word, `genre` (1,) an index in GENRES -> CorefScores."""
        h = self.encoder(word_ids, mask, elmo_input, elmo_output)  # (S, T, d)
        x = h[mask]  # (N, d): the segment's words in order
        sentence_of = torch.arange(mask.shape[0], device=mask.device).unsqueeze(1)
        sentence_of = sentence_of.expand_as(mask)[mask]  # (N,)
        starts, ends = candidate_spans(sentence_of, self.config.max_span_width)  # (C,)
        g = self.span_representations(x, starts, ends)  # (C, G)
        candidate_mention = self.mention(g).squeeze(-1)  # (C,)
        candidates = torch.stack([starts, ends], dim=1)  # (C, 2)
        # keep the best spans, in document order
        k = min(len(starts), max(1, int(self.config.top_span_ratio * x.shape[0])))
        top = candidate_mention.topk(k).indices
        top = top[torch.argsort(starts[top] * x.shape[0] + ends[top])]  # (k,)
        starts, ends, g, mention = starts[top], ends[top], g[top], candidate_mention[top]
        # each kept span against its nearest earlier ones
        a = min(self.config.max_antecedents, k)
        offsets = torch.arange(1, a + 1, device=x.device)  # (A,)
        antecedents = torch.arange(k, device=x.device).unsqueeze(1) - offsets  # (k, A)
        valid = antecedents >= 0
        antecedents = antecedents.clamp(min=0)
        pair = self.pair_features(g, antecedents, offsets, speakers[0][starts], genre)
        scores = (mention.unsqueeze(1) + mention[antecedents]
                  + self.antecedent(pair).squeeze(-1))  # (k, A)
        scores = scores.masked_fill(~valid, float("-inf"))
        dummy = scores.new_zeros(k, 1)
        return CorefScores(starts, ends, antecedents, torch.cat([dummy, scores], dim=1),
                           candidates, candidate_mention)

    def span_representations(self, x: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor
                             ) -> torch.Tensor:
        """[x_start; x_end; attention-weighted head; width embedding] (C, G) of each span."""
        words = starts.unsqueeze(1) + torch.arange(self.config.max_span_width,
                                                   device=x.device)  # (C, W)
        inside = words <= ends.unsqueeze(1)
        words = words.clamp(max=x.shape[0] - 1)
        logits = self.head_attention(x).squeeze(-1)[words]  # (C, W)
        weights = logits.masked_fill(~inside, float("-inf")).softmax(-1)  # (C, W)
        head = (weights.unsqueeze(-1) * x[words]).sum(1)  # (C, d)
        return torch.cat([x[starts], x[ends], head, self.width(ends - starts)], dim=-1)

    def pair_features(self, g: torch.Tensor, antecedents: torch.Tensor,
                      offsets: torch.Tensor, speakers: torch.Tensor, genre: torch.Tensor
                      ) -> torch.Tensor:
        """[g_i; g_j; g_i * g_j; same speaker; genre; distance] (k, A, 3G + 3F) for span i
        and each candidate antecedent j."""
        k, a = antecedents.shape
        g_i = g.unsqueeze(1).expand(k, a, -1)  # (k, A, G)
        g_j = g[antecedents]  # (k, A, G)
        same = (speakers.unsqueeze(1) == speakers[antecedents]).long()  # (k, A)
        features = [self.same_speaker(same),
                    self.genre(genre).expand(k, a, -1),
                    self.distance(distance_bucket(offsets)).expand(k, a, -1)]
        return torch.cat([g_i, g_j, g_i * g_j, *features], dim=-1)

    def loss(self, scores: CorefScores, targets: torch.Tensor, mask: torch.Tensor
             ) -> torch.Tensor:
        """-log of the summed probability of each kept span's gold antecedents (the dummy
        for a span that is no gold mention or has no earlier kept mention of its cluster),
        summed over the kept spans; plus the mention loss, binary cross-entropy summed over
        the candidates. `targets` (1, M, 3): the gold mentions' start, end and cluster
        number."""
        gold = targets[0]  # (M, 3)
        is_mention = gold_cluster(scores.candidates, gold) > 0  # (C,)
        mention_loss = nn.functional.binary_cross_entropy_with_logits(
            scores.mention, is_mention.float(), reduction="sum")
        cluster = gold_cluster(torch.stack([scores.starts, scores.ends], dim=1), gold)  # (k,)
        real = scores.scores[:, 1:] > float("-inf")  # (k, A)
        same = (cluster[scores.antecedents] == cluster.unsqueeze(1)) & real \
            & (cluster.unsqueeze(1) > 0)  # (k, A)
        allowed = torch.cat([~same.any(1, keepdim=True), same], dim=1)  # (k, 1 + A)
        gold_scores = scores.scores.masked_fill(~allowed, float("-inf"))
        return (scores.scores.logsumexp(1) - gold_scores.logsumexp(1)).sum() + mention_loss

    def predict(self, scores: CorefScores, mask: torch.Tensor
                ) -> list[list[list[tuple[int, int]]]]:
        """The segment's clusters of (start, end) word offsets: each kept span joins the
        cluster of its best-scoring antecedent, none when the dummy scores best."""
        best = scores.scores.argmax(1).tolist()  # (k,)
        spans = list(zip(scores.starts.tolist(), scores.ends.tolist(), strict=True))
        antecedents = scores.antecedents.tolist()
        cluster_of: dict[int, int] = {}
        clusters: list[list[tuple[int, int]]] = []
        for i, choice in enumerate(best):
            if choice == 0:
                continue
            j = antecedents[i][choice - 1]
            if j not in cluster_of:
                cluster_of[j] = len(clusters)
                clusters.append([spans[j]])
            cluster_of[i] = cluster_of[j]
            clusters[cluster_of[j]].append(spans[i])
        return [clusters]
