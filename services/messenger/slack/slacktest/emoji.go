package slacktest

// standardEmoji are emoji names every Slack workspace has (a subset of
// Slack's set, with its aliases); reactions.add refuses other names as
// invalid_name unless AddEmoji added them.
var standardEmoji = set(
	"+1", "thumbsup", "-1", "thumbsdown", "heart", "broken_heart", "fire", "tada", "partying_face",
	"eyes", "white_check_mark", "heavy_check_mark", "ballot_box_with_check", "x",
	"negative_squared_cross_mark", "pray", "clap", "raised_hands", "ok_hand", "wave", "muscle",
	"handshake", "writing_hand", "saluting_face", "grinning", "smiley", "smile", "grin", "joy",
	"rolling_on_the_floor_laughing", "blush", "slightly_smiling_face", "wink", "heart_eyes",
	"smiling_face_with_3_hearts", "kissing_heart", "sunglasses", "hugging_face", "thinking_face",
	"face_with_raised_eyebrow", "neutral_face", "sleeping", "cry", "sob", "open_mouth", "scream",
	"exploding_head", "rage", "face_with_symbols_on_mouth", "innocent", "nerd_face", "see_no_evil",
	"shrug", "clown_face", "ghost", "hankey", "poop", "shit", "rocket", "100", "star", "star2",
	"sparkles", "zap", "bulb", "pushpin", "memo", "pencil", "paperclip", "bell", "alarm_clock",
	"hourglass_flowing_sand", "hourglass", "warning", "rotating_light", "octagonal_sign",
	"question", "exclamation", "heavy_exclamation_mark", "bangbang", "ok", "cool", "dart", "trophy",
	"bug", "pill", "stethoscope", "moneybag", "chart_with_upwards_trend",
	"chart_with_downwards_trend", "repeat", "male-technologist", "brain", "coffee", "champagne",
	"smiling_face_with_smiling_eyes", "laughing", "satisfied", "sweat_smile", "slightly_frowning_face",
	"disappointed", "confused", "hushed", "astonished", "face_palm", "ok_woman", "no_entry",
	"no_entry_sign", "heavy_plus_sign", "heavy_minus_sign", "arrow_right", "arrow_left", "calendar",
	"date", "email", "envelope", "link", "lock", "unlock", "key", "hammer_and_wrench", "gear",
	"thumbsup_all", "slack", "the_horns", "v", "point_up", "point_right", "raising_hand",
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
