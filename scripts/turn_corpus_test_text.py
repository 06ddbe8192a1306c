"""The turn corpus's test split: sentences, agent lines and slot words written on 2026-12-07 (issue 65),
after every rule and table in turn_detection/ was fixed, for other businesses (a vet, a pharmacy, a bank, a
plumber, a hotel, a garage) than the dev split's. No rule, word table or weight was chosen on them; they are
said by voices the dev split does not use (`TEST_VOICES` in make_turn_corpus.py). Same cases and "|" pause
marks as the dev templates.
"""

from __future__ import annotations

# fmt: off
TEST_TEMPLATES: dict[str, list[str]] = {
    "statement": [
        "My cat hasn't eaten anything since {day}.", "The tap in the upstairs bathroom drips all night.",
        "I'd like to move my appointment to {day}.", "The prescription ran out a couple of days ago.",
        "We checked out of room {room} this morning.", "I noticed a charge I don't recognise.",
    ],
    "question": [
        "Do you stock the children's version of that medicine?", "How late is the garage open on {day}?",
        "Can I bring my dog into the hotel bar?", "Why was my card declined at the till?",
        "Is the vet available for a home visit?", "What do I need to bring for the inspection?",
    ],
    "short_answer": [
        "Not that I know of.", "Yes, twice.", "Only the small one.", "Neither, actually.", "{day} works.",
        "Probably not.",
    ],
    "backchannel": ["Mm.", "Yep.", "Okay, sure.", "Ah, right."],
    "function_word": [
        "I'm worried that my | rabbit isn't drinking enough.",
        "The plumber said he would | come back on {day}.",
        "Could you send the | invoice to my work address?", "My husband left his glasses in | room {room}.",
        "We wanted to ask about | parking for the wedding.", "The pharmacist told me to | take it with food.",
    ],
    "content_word": [
        "The brakes on my van | make a grinding noise.", "Our old boiler | keeps switching itself off.",
        "The tablets you gave me | made me very dizzy.", "Yesterday a courier | left a card but no parcel.",
        "My grandmother's savings account | was frozen last week.",
        "The puppy we adopted | keeps scratching.",
    ],
    "filler": [
        "The problem started, er, | just after the storm.", "I'd like to, um, | cancel the second booking.",
        "She's about, uh, | six months old now.", "We could come on, um, | {day} morning.",
        "It's the, er, | the blue hatchback.", "My account is, um, | the joint one with my wife.",
    ],
    "thinking": [
        "Ooh, that's a tricky one. | I'd go for the later slot.", "Right, where did I put it. | Here it is.",
        "Wait a moment. | It's in my other bag.", "Now what was it called. | The green inhaler.",
        "Erm, I'm not sure. | Maybe about a week ago.",
    ],
    "digits": [
        "The account number is {d4} | {d4}.", "My policy number is {d3}, | {d3}, | {d3}.",
        "The sort code is {d2}, | {d2}, | {d2}.", "Our booking reference is {d3} | {d3}.",
        "The registration ends in {d3}, | {d2}.",
    ],
    "spelled": [
        "The dog's name is {pet}, {spellpet}.", "My surname's {surname}, it's {spell}.",
        "The medicine is spelled {spell}.", "It's under {surname}, {spell}.",
    ],
    "list": [
        "We need towels, | pillows, | and a kettle.", "She's allergic to nuts, | eggs, | and shellfish.",
        "The car needs a service, | new wipers, | and a wash.", "I'd like {item}, | {item}, | or {item}.",
        "We're free on {day}, | {day}, | and {day}.",
    ],
    "complete_clause": [
        "My dog was sick last night. | She seems fine this morning.",
        "I called last week. | Nobody ever called me back.",
        "The room was lovely. | But the heating didn't work.",
        "I've got the form here. | Where do I send it?",
        "The car failed its test. | It needs two new tyres.",
    ],
    "interruption": [
        "Hang on, that's not right.", "Sorry, which branch was that?", "No, the other account.",
        "Stop, I need to check something.",
    ],
    "number_end": [
        "Could I book it for {hour}?", "She turned {age} last month.", "We have {count}.",
        "The flight leaves at {hour}.", "I'd need {count} rooms.",
    ],
}
# fmt: on

# fmt: off
TEST_AGENT_LINES: dict[str, list[str]] = {
    "statement": [
        "Riverside Vets, how can I help?", "Hello, you're through to the plumbing line.",
        "Your next check-up is on the fourth. Anything else?", "Pharmacy counter, what can I do for you?",
        "Thanks for staying with us. How can I help?", "Card services, what's the issue?",
    ],
    "question": [
        "We have that in tablets and as a syrup.", "Garage reception, how can I help?",
        "Welcome to the Grand, is there anything you need?", "Fraud team, how can I help today?",
        "The clinic is open until six tonight.", "Your car's test is booked for Thursday.",
    ],
    "short_answer": [
        "Has the dog had any reactions to vaccines before?", "Have you called us about this before?",
        "Which of the bags is yours, the large or the small one?", "Would you like a bath or a shower room?",
        "When can the engineer come round?", "Will you be needing a taxi tomorrow?",
    ],
    "backchannel": [
        "The engineer will switch the water off for about an hour.",
        "You'll get a text when your prescription is ready.",
        "Breakfast is served from seven until ten in the garden room.",
        "We'll hold the card while we look into the payment.",
    ],
    "function_word": [
        "What seems to be wrong with your pet?", "Did the plumber say when he would be back?",
        "Is there anything else I can help with on the account?", "Lost property, how can I help?",
        "Events team, how can I help?", "Did they explain how to take the medicine?",
    ],
    "content_word": [
        "What's the problem with the vehicle?", "How can I help with your heating?",
        "How have you been since you started the new tablets?", "Is this about a delivery?",
        "Who is the account for?", "How is the new puppy settling in?",
    ],
    "filler": [
        "When did you first notice the leak?", "What would you like to do with the bookings?",
        "And how old is she?", "When would suit you to come in?", "Which car is it?",
        "Which account is this about?",
    ],
    "thinking": [
        "Would you prefer the nine o'clock or the eleven o'clock slot?", "Do you have your booking letter?",
        "Can you find the reference on your ticket?", "What's the name of the medicine you use?",
        "When did the symptoms start?",
    ],
    "digits": [
        "Could I take your account number, please?", "What's the policy number?",
        "And the sort code?", "Do you have the booking reference?",
        "What's the registration of the car?",
    ],
    "spelled": [
        "What's your dog's name?", "Can I take your surname, please?",
        "How is the medicine spelled?", "What name is the booking under?",
    ],
    "list": [
        "What do you need brought up to the room?", "Is she allergic to anything?",
        "What would you like us to do to the car?", "What would you like delivered?",
        "Which days are you free next week?",
    ],
    "complete_clause": [
        "Hello, how is your dog doing?", "How can I help you today?",
        "How was your stay with us?", "Did the form arrive?", "How did the test go?",
    ],
    "interruption": [
        "I've moved your appointment to the Tuesday at four.",
        "I'll transfer you to our Manchester branch now.",
        "I've frozen the account ending in four two.",
        "Next I'll need your date of birth and your postcode.",
    ],
    "number_end": [
        "The vet's first free slot is after lunch.", "How old is your daughter?",
        "How many cats do you have?", "What time is your flight?", "How many rooms would you need?",
    ],
}
# fmt: on

TEST_WORDS: dict[str, list[str]] = {
    "day": ["Monday", "Wednesday", "Friday", "Sunday", "the weekend", "tomorrow"],
    "room": ["two fourteen", "thirty one", "one oh six", "five"],
    "item": ["some bread", "a newspaper", "fresh towels", "a phone charger", "two teas"],
    "hour": ["half past nine", "eleven", "three thirty", "six"],
    "age": ["eight", "seventeen", "three", "ten"],
    "count": ["two", "four", "seven", "twelve"],
    "pet": ["Biscuit", "Pepper", "Rolo", "Juniper"],
    "surname": ["Whitaker", "Osei", "Kowalczyk", "Ferreira", "Nakamura", "Dunleavy"],
}
