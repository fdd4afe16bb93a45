// Intents of the builtin assistant (docs/ai.md): rules for the two intents that protect a
// patient (urgent, then clinical), the naive Bayes model trained at build time for the others,
// the hand-off decision and the answer composed only from passages and fixed phrases.
//
// The rules read the patient's words only (fold()ed, in English, Portuguese and Spanish): no
// instruction inside a message can change what they find. They are phrase lists matched as
// whole-word sequences and pairs of lists that must meet within a few words ("peito" near
// "dor"). Recall is the goal: a false alarm costs a person's minute, a missed one much more.
#include "domain/assistant.hpp"
#include "domain/assistant_model.hpp"

#include <algorithm>
#include <array>
#include <unordered_set>

namespace crm::domain::ai {

namespace {

// An answer quotes the best passage and the next ones (sentences now, docs/ai.md#retrieval)
// that score at least this share of the best, up to this many.
constexpr std::size_t max_answer_passages = 3;
constexpr double next_passage_share = 0.7;

// ---- patterns -------------------------------------------------------------------------------
//
// A list is phrases separated by ','; a phrase is words separated by ' '; a word is
// alternatives separated by '|'; "abc*" matches words starting with abc, "*abc" words of at
// least three more letters ending with abc.

struct phrase {
  std::vector<std::vector<std::string_view>> words;
};

struct rule_spec {
  intent kind;
  const char* name;
  const char* any;              // one of these phrases...
  const char* with = nullptr;   // ...within `window` words of one of these (when given)
  int window = 0;               // words allowed between the two
  bool ordered = false;         // the `any` phrase comes first
  const char* unless = nullptr; // none of these anywhere in the message
};

struct rule {
  intent kind;
  std::string_view name;
  std::vector<phrase> any, with, unless;
  int window;
  bool ordered;
};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i <= s.size()) {
    const std::size_t j = std::min(s.find(sep, i), s.size());
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::vector<phrase> parse_list(const char* spec) {
  std::vector<phrase> out;
  if (spec == nullptr) return out;
  for (std::string_view p : split(spec, ',')) {
    phrase ph;
    for (std::string_view w : split(p, ' ')) ph.words.push_back(split(w, '|'));
    if (!ph.words.empty()) out.push_back(std::move(ph));
  }
  return out;
}

bool word_matches(std::string_view pattern, std::string_view word) {
  if (pattern.size() > 1 && pattern.back() == '*')
    return word.starts_with(pattern.substr(0, pattern.size() - 1));
  if (pattern.size() > 1 && pattern.front() == '*') {
    const std::string_view suffix = pattern.substr(1);
    if (word.ends_with('s')) word.remove_suffix(1); // plurals: statins, antibiotics
    return word.size() >= suffix.size() + 3 && word.ends_with(suffix);
  }
  return word == pattern;
}

struct span {
  std::size_t begin, end;
};

void find_all(const phrase& p, const std::vector<std::string>& tokens, std::vector<span>& out) {
  const std::size_t n = p.words.size();
  for (std::size_t i = 0; i + n <= tokens.size(); ++i) {
    bool ok = true;
    for (std::size_t k = 0; k < n && ok; ++k)
      ok = std::any_of(p.words[k].begin(), p.words[k].end(),
                       [&](std::string_view alt) { return word_matches(alt, tokens[i + k]); });
    if (ok) out.push_back({i, i + n});
  }
}

std::vector<span> find_all(const std::vector<phrase>& ps, const std::vector<std::string>& tokens) {
  std::vector<span> out;
  for (const phrase& p : ps) find_all(p, tokens, out);
  return out;
}

bool rule_fires(const rule& r, const std::vector<std::string>& tokens) {
  const std::vector<span> a = find_all(r.any, tokens);
  if (a.empty()) return false;
  bool hit = r.with.empty();
  if (!hit) {
    const std::vector<span> w = find_all(r.with, tokens);
    const auto gap_ok = [&](const span& first, const span& second) {
      return second.begin >= first.end &&
             second.begin - first.end <= static_cast<std::size_t>(r.window);
    };
    for (const span& x : a) {
      for (const span& y : w) {
        if (gap_ok(x, y) || (!r.ordered && gap_ok(y, x))) {
          hit = true;
          break;
        }
      }
      if (hit) break;
    }
  }
  return hit && find_all(r.unless, tokens).empty();
}

// Words of a message for the rules: fold()ed, with English negations in one token
// (can't / can not / cannot → cant, isn't → isnt, does not → doesnt).
std::vector<std::string> rule_tokens(std::string_view message) {
  static const std::unordered_set<std::string_view> n_t = {
      "can",    "don",     "won",  "isn",   "aren",  "doesn", "didn", "couldn",
      "wouldn", "shouldn", "wasn", "weren", "haven", "hasn",  "hadn", "ain"};
  static const std::unordered_set<std::string_view> before_not = {
      "can",   "do",    "does",   "did", "is",   "are", "was", "were",
      "could", "would", "should", "has", "have", "had", "will"};
  std::vector<std::string> out;
  const std::string folded = fold(message);
  for (std::string_view w : split(folded, ' ')) {
    if (!out.empty()) {
      std::string& last = out.back();
      if (w == "t" && n_t.contains(last)) {
        last += 't';
        continue;
      }
      if (w == "not" && before_not.contains(last)) {
        last = last == "can" ? "cant" : last == "will" ? "wont" : last + "nt";
        continue;
      }
    }
    out.emplace_back(w == "cannot" ? std::string_view("cant") : w);
  }
  return out;
}

// ---- the rules ------------------------------------------------------------------------------

constexpr const char* medicines =
    "medicament*|medicine|medicines|medication*|medicin*|remedio*|drug|drugs|pill|pills|pilula*|"
    "tablet|tablets|comprimido*|pastilla*|capsula*|capsule*|antibiotic*|antiinflamat*,"
    "anti inflamat*,anticoncep*|contracept*|insulin*|antidepres*|antialerg*|antihistamin*|"
    "vitamin*|supplement*|suplement*|ferro|hierro|iron|ibuprof*|paracetamol|acetaminophen|"
    "tylenol|motrin|advil|dipirona|novalgina|aspirin*|amoxicil*|azitromicin*|azithromycin|"
    "sertral*|fluoxetin*|metformin*|levotirox*|levothyrox*|omeprazol*|losartan*|prednis*|"
    "corticoid*|cortison*|rivotril|clonazepam|alprazolam|xanax|diazepam|zolpidem|tramadol|"
    "codein*|morfin*|morphin*|dorflex|buscopan|dramin|benadryl|loratadin*|cetirizin*|allegra|"
    "statin*|estatina*|enalapril|captopril|lisinopril|ramipril|atenolol|sinvastatin*|simvastatin|"
    "atorvastatin*|"
    "warfarin*|varfarin*|clopidogrel|anticoagul*|*cilina|*cillin|*micina|*mycin|*floxacin|"
    "*floxacino|*prazol|*prazole|*sartan|*sartana|*statin|*statina|*olol|*azepam|*zolam|"
    "*tiroxina|*thyroxine|*tralina|*traline|*formina|*formin|*profeno|*profen|*fenaco|*fenac|"
    "*cetamol|*pirona|*oxetina|*oxetine|*tadina|*tadine|*izina|*izine,birth control";
// "Do you treat back pain?" asks about a service, not about the patient's body.
constexpr const char* service_question =
    "do you treat,do you see,do you handle,do you offer,do you do,do you have,do you provide,"
    "voces tratam,vcs tratam,voces atendem,vcs atendem,voces fazem,vcs fazem,voces oferecem,"
    "vcs oferecem,ustedes tratan,tratan,atienden,ofrecen,ustedes hacen,tienen";
constexpr const char* symptoms =
    "symptom*|sintoma*|pain|pains|painful|hurt|hurts|hurting|ache|aches|aching|headache*|"
    "stomachache*|toothache*|backache*|dor|dores|doendo|doi|doe|dolor|dolores|duele|duelen|"
    "doliendo|fever*|febre|febril|fiebre|cough*|tosse|tossi*|tos|tosiendo|rash*|mancha|manchas|"
    "sarpullido|erupcion|ronch*|brotoeja*|nausea*|nauseous|enjoo*|enjoad*|vomit*|diarr*|dizz*|"
    "tontura*|tonta|tonto|mareo*|marea*|marear*|swell*|swollen|inchaco|inchad*|inchou|inchand*|"
    "hinchaz*|hinchad*|hincho|infec*|lump*|caroco*|nodulo*|bulto*|itch*|coceira|cocando|coca|"
    "picazon|comezon|pica|sore|sores|bleed*|sangra*|sangro*|sangrou|ardor*|ardencia|ardendo|arde|"
    "burning|cramp*|colica*|colico*|insomn*|anxiety|ansiedade|ansiedad|panic|panico|depress*|"
    "tired|fatigue|cansac*|cansad*|sick|doente|enfermo*|enferma*|resfri*|congest*|catarr*|"
    "coriza|mucus|allerg*|alerg*|pus|secrec*|discharge|corrimento|flujo|wound*|ferida*|herida*|"
    "numb|numbness|dormen*|formig*|hormig*|tingl*|palpita*|constipa*|estrenimiento|rouquid*|"
    "ronquera|"
    "hoarse*|weakness|fraqueza|debilidad";

// Order matters only for the name reported: urgent rules come before clinical ones.
const rule_spec specs[] = {
    // ---- urgent ----
    {intent::urgent, "chest pain", "chest|peito|pecho|torax|toracic*|toracica",
     "pain*|painful|hurt*|ache*|aching|tight*|pressure|squeez*|crush*|heavy|heaviness|dor|dores|"
     "doi|doe|doendo|aperto|apert*|apret*|pressao|peso|dolor*|duele|doliendo|opresion|presion|"
     "oprim*|punzada*|pontada*|fisgada*|agulhada*|elephant|weight",
     4},
    {intent::urgent, "heart attack",
     "heart attack,ataque cardiaco,ataque do coracao,ataque de coracao,ataque al corazon,"
     "ataque de corazon,infart*,enfart*,cardiac arrest,parada cardiaca,paro cardiaco,"
     "parada cardiorrespiratoria,paro cardiorrespiratorio"},
    {intent::urgent, "left arm pain", "left arm,braco esquerdo,brazo izquierdo",
     "pain*|hurt*|numb|numbness|tingl*|dor|doi|doendo|dormen*|dormid*|formig*|dolor|duele|hormig*|"
     "entumec*|adormec*",
     4},
    {intent::urgent, "cannot breathe",
     "cant|couldnt|unable|hard|hardly|barely|difficult*|difficulty|trouble|short*|struggl*|"
     "stop*|isnt|wasnt|not|nao|no|n|dificuldade*|dificultad*|falta|sem|sin|parou|dejo|cuesta|"
     "custa|custando|costando|laboured|labored|wheez*|chiando|chiado|chiadeira|silbid*|sibilan*",
     "breath*|respir*", 2, true},
    {intent::urgent, "cannot breathe", "breath*|respir*",
     "difficult*|dificil|dificuldade*|dificultad*|hard|labored|laboured|mal|ofegante|stopped|"
     "parou|paro|weird|estranh*|raro|rara|wheez*|chiando|chiado|silbid*|fast|rapid*|acelerad*",
     2, true},
    {intent::urgent, "cannot breathe", "falta|faltando|faltou|falto", "ar|aire|air", 2, true},
    {intent::urgent, "cannot breathe",
     "sem ar,sin aire,no air,cant get air,gasping,sufoc*,asfixi*,ahog*,chok*,engasg*,atragant*,"
     "breathless*,out of breath,drown*,afog*",
     nullptr, 0, false, "condicionado|acondicionado|conditioning|conditioner"},
    {intent::urgent, "cannot breathe", "wheez*|chiando|chiado|chiadeira|silbid*|sibilan*"},
    {intent::urgent, "blue lips", "lips|labios|boca", "blue|azul*|roxo*|roxa*|morad*|purple", 3},
    {intent::urgent, "blue lips", "turning blue,turned blue,going blue,went blue"},
    {intent::urgent, "blue lips", "roxo|roxa|morado|morada|azulad*",
     "breath*|respir*|lips|labios|boca|rosto|face|cara|baby|bebe|nene|wheez*|chiando|silbid*", 4},
    {intent::urgent, "heavy bleeding", "bleed*|sangra*|sangro*|sangrou|sangrei|hemorrag*",
     "heavy|heavily|lot|lots|profuse*|excessive*|severe*|everywhere|nonstop|gushing|pouring,"
     "wont stop,doesnt stop,cant stop,not stopping,still|muito|muita|forte|bastante|demais,"
     "nao para,nao parou,sem parar,mucho|mucha|abundante*|intens*,no para,no paro,sin parar,"
     "pregnan*|gravid*|embaraz*|gestante|jorr*|chorro|hour|hours|hora|horas",
     7},
    {intent::urgent, "heavy bleeding", "hemorrhag*|hemorrag*"},
    {intent::urgent, "heavy bleeding", "lot|lots|muito|muita|tanto|tanta|mucha|mucho",
     "blood|sangue|sangre", 1, true},
    {intent::urgent, "heavy bleeding",
     "so much blood,too much blood,blood everywhere,sangue por todo lado,sangre por todas partes,"
     "sangre por todos lados"},
    {intent::urgent, "coughing or vomiting blood",
     "vomit*|cough*|tossi*|tosse|tosi*|tos|escarr*|cusp*|escup*|puk*,throw* up,threw up",
     "blood|sangue|sangre|bloody|sanguinolent*", 3},
    {intent::urgent, "suicidal thoughts",
     "suicid*,kill myself,killing myself,end my life,ending my life,end it all,want to end it,"
     "take my own life,take my life,taking my life,want to die,wanna die,wish i was dead,"
     "wish i were dead,better off dead,dont want to live,dont want to be alive,no reason to live,"
     "hurt myself,harm myself,hurting myself,harming myself,self harm,cut myself,cutting myself,"
     "want to disappear,me matar,me mato,quero morrer,queria morrer,vontade de morrer,quero sumir,"
     "tirar minha vida,tirar a minha vida,tirar a vida,tirar a propria vida,"
     "acabar com minha vida,acabar com a minha vida,acabar com tudo,nao quero mais viver,"
     "nao quero viver,me machucar,me ferir,automutila*,autolesion*,matarme,me quiero morir,"
     "quiero morir,quiero morirme,ganas de morir,quitar* la vida,quitar mi vida,"
     "acabar con mi vida,acabar con todo,terminar con todo,no quiero vivir,"
     "no quiero seguir viviendo,hacerme dano,cortarme,quiero desaparecer,me quiero matar,"
     "quiero matarme,voy a matarme,me voy a matar,hang myself,hanging myself,me enforcar,"
     "ahorcarme,me voy a ahorcar,colgarme,me voy a colgar,shoot myself,me dar um tiro,"
     "pegarme un tiro,dispararme,rather be dead,better off dead,wish i was dead,"
     "queria estar morto,queria estar morta,quisiera estar muerto,quisiera estar muerta,"
     "ojala estuviera muerto,ojala estuviera muerta,nobody would miss me,no one would miss me,"
     "ninguem sentiria minha falta,ninguem vai sentir minha falta,nadie me extranaria,"
     "nadie me echaria de menos,sem vontade de viver,sin ganas de vivir,"
     "nao vale a pena viver,no vale la pena vivir,not worth living,desisto de viver"},
    {intent::urgent, "suicidal thoughts",
     "jump|jumping|pular|pulando|saltar|saltando|lanzarme|tirarme|tirar,me jogar,throw myself",
     "off|bridge|ponte|puente|building|predio|edificio|roof|telhado|techo|azotea|window|janela|"
     "ventana|cliff|balcony|varanda|sacada|balcon|andar|train|trem|tren|viaduct*|viaduto|"
     "metro|subway|precipicio|penhasco",
     3, true},
    {intent::urgent, "suicidal thoughts",
     "cant take it anymore,cant go on,nao aguento mais,no aguanto mas,no puedo mas",
     "viver|vivir|vida|life|living|live|morrer|morir|die|matar|matarme|kill|tudo|todo|"
     "everything|sumir|desaparecer",
     3},
    {intent::urgent, "suicidal thoughts",
     "cut|cutting|slit|slash*|cortei|cortar|corte|cortarme|cortando",
     "wrist*|vein*|pulso*|veia*|vena*", 3, true},
    {intent::urgent, "overdose",
     "overdos*|sobredos*,think im dying,think i am dying,acho que vou morrer,"
     "acho que estou morrendo,sinto que vou morrer,creo que me voy a morir,"
     "creo que me estoy muriendo,siento que me muero"},
    {intent::urgent, "overdose",
     "took|take|taking|tomei|tome|tomou|tomo|tomar|tomarme|engoli|swallowed|trague|ingeri",
     "whole bottle,whole box,whole pack,entire bottle,all the pills,all my pills,all of my pills,"
     "bottle of pills,handful of pills,too many pills,a lot of pills,cartela inteira,"
     "caixa inteira,frasco inteiro,vidro inteiro,todos os comprimidos,todos os remedios,"
     "todas as pilulas,muitos comprimidos,muitos remedios,todas las pastillas,todo el frasco,"
     "muchas pastillas,la caja entera,caja entera,frasco entero,them all,all of them,"
     "all at once,de uma vez,de una vez,todos de uma vez,todas de una vez",
     3, true},
    {intent::urgent, "unconscious",
     "unconscious*,passed out,pass out,passing out,faint*,blacked out,black out,collapse*,"
     "unresponsive,wont wake,cant wake,not waking,isnt waking,desmai*,desfalec*,inconscien*,"
     "perdeu a consciencia,perdi a consciencia,perdeu os sentidos,perdi os sentidos,nao acorda,"
     "nao reage,desmay*,perdio el conocimiento,perdi el conocimiento,perdio la conciencia,"
     "perdio el sentido,no despierta,no reacciona,sin conocimiento,ataque epilept*,convuls*,"
     "seizure*,seizing,epileptic fit,having a fit"},
    {intent::urgent, "unconscious",
     "not responding,isnt responding,wont respond,doesnt respond,not answering,isnt answering,"
     "nao responde,nao esta respondendo,no responde,no contesta,nao reage,no reacciona",
     "fell|fallen|collapse*|floor|ground|chao|piso|suelo|caiu|cayo|bathroom|banheiro|bano|mom|"
     "mother|dad|father|husband|wife|son|daughter|baby|grandma|grandpa|grandmother|grandfather|"
     "mae|mama|pai|papa|marido|esposa|esposo|mulher|filho|filha|hijo|hija|bebe|avo|abuelo|"
     "abuela|shaking|tremendo|temblando",
     6, false, "phone|telefone|telefono|celular|messages|mensagens|mensajes|whatsapp|email|calls"},
    // Rolled eyes alone are also a gesture ("me puso los ojos en blanco"): only with shaking.
    {intent::urgent, "unconscious",
     "foaming at the mouth,espuma pela boca,espuma por la boca,echando espuma,espumando"},
    {intent::urgent, "unconscious",
     "shaking|shakes|jerking|convulsing|tremendo|tremores|temblando|tiembla|sacudi*|debatendo|"
     "debatiendo",
     "uncontrollabl*,all over,floor|ground|chao|piso|suelo,sem parar,sin parar,nao para,"
     "no para,foam*|espuma*|babando|baba|eyes|olhos|ojos|unconscious|inconscien*,"
     "nao responde,no responde,wont stop,cant stop",
     6},
    {intent::urgent, "unwell infant", "baby|babies|bebe|nene|newborn|recem|recien|infant|lactente",
     "floppy|limp|lethargic|letargic*|molinho|molinha|mole|prostrad*|decaid*,very sleepy,"
     "hard to wake,wont wake,wont feed,not feeding,nao mama,nao quer mamar,no quiere comer,"
     "no come,sem reacao,sin reaccion,fontanel*|moleira",
     8},
    {intent::urgent, "stroke signs", "stroke,derrame,avc,acv,ictus,aneurism*,aneurysm*"},
    {intent::urgent, "stroke signs",
     "cant lift,cant raise,cant move,nao consegue levantar,nao consigo levantar,"
     "nao consegue mexer,no puede levantar,no puedo levantar,no puede mover",
     "arm|arms|braco|bracos|brazo|brazos|leg|perna|pierna|hand|mao|mano", 4},
    {intent::urgent, "stroke signs", "face|rosto|cara|boca|mouth",
     "droop*|caid*|caiu|torto|torta|tort*|torci*|crooked|uneven|paraliz*|paralis*|paralys*|"
     "dormen*|numb|numbness|entumec*|adormec*|cayo|desvi*",
     5},
    {intent::urgent, "stroke signs", "speech|speak*|talk*|fala*|habla*|hablar|palabra*|words",
     "slurr*|enrolad*|enrolando|arrastrad*|arrastra*|embolad*|embolando|raro|rara|estranh*|weird|"
     "strange*|confus*|garbled|trabad*|mumbl*,sem sentido,sin sentido,gibberish|nonsense",
     3},
    {intent::urgent, "stroke signs",
     "sudden*,de repente,repentin*,subit*,all of a sudden,do nada,de la nada",
     "weak*|fraqueza|fraca|fraco,sem forca,sin "
     "fuerza*,numb|numbness|dormen*|dormid*|adormec*|entumec*|"
     "formig*|hormig*|paraliz*|paralis*|paralys*,one side,um lado,un lado,lado|side,cant move,"
     "nao consigo mexer,no puedo mover,cant feel,nao sinto,no siento,vision|visao|vista|blind*|"
     "cego|cega|ciego|ciega|confus*|speech|fala*|habla*|speak*|talk*|dizz*|tontura|mareo|"
     "balance|equilibrio|headache,dor de cabeca,dolor de cabeza",
     7},
    {intent::urgent, "stroke signs",
     "cant feel,nao sinto,no siento,cant move,nao consigo mexer,nao consigo mover,no puedo mover,"
     "numb|numbness|dormen*|dormid*|paraliz*|paralis*|paralys*|weak*|fraqueza,sem forca,sin "
     "fuerza*",
     "one side,um lado,un lado,left side,right side,lado esquerdo,lado direito,lado izquierdo,"
     "lado derecho,half of my,metade do,mitad del,side of my,lado do corpo,lado del cuerpo",
     4},
    {intent::urgent, "anaphylaxis",
     "anaphyla*,anafila*,angioedema,edema de glote,edema de glotis,allergic shock,"
     "choque alergico,shock alergico"},
    {intent::urgent, "anaphylaxis", "throat|garganta|tongue|lingua|lengua|lips|labios|glote|glotis",
     "swell*|swollen|closing|closed|inchad*|inchand*|inchou|inchaco|fechando|fechad*|fechou|"
     "hinch*|cerrando|cerrad*|cerro|cierra,close up,closing up",
     5},
    {intent::urgent, "anaphylaxis", "allergic reaction,reacao alergica,reaccion alergica",
     "breath*|respir*|throat|garganta|swell*|inch*|hinch*|face|rosto|cara|lips|labios", 6},
    {intent::urgent, "meningitis signs",
     "stiff neck,neck is stiff,neck stiff,pescoco duro,pescoco rigido,nuca dura,nuca rigida,"
     "rigidez de nuca,cuello rigido,cuello duro,purple spots,purple rash,manchas roxas,"
     "manchas moradas,petequia*|petechia*",
     "fever*|febre|fiebre|temperature|temperatura", 6},
    {intent::urgent, "newborn fever", "newborn|recem|recien",
     "fever*|febre|fiebre|temperature|temperatura", 6},
    {intent::urgent, "severe burn",
     "burn|burns|burned|burnt|queim*|quemad*|queme|quemo|quemaste|escald*",
     "bad|badly|severe*|serious*|boiling|fervend*|hirviendo|oil|oleo|aceite|skin|pele|piel|"
     "blister*|bolha*|ampolla*|feio|feia|grave|graves,third degree,second degree,terceiro grau,"
     "segundo grau,tercer grado,segundo grado,chemical|quimic*|acid*|large|big|grande|huge|"
     "peeling,coming off,saindo|descascando,se cae,cayendo|soltando|fire|fogo|fuego|electric*|"
     "eletric*",
     5},
    {intent::urgent, "poisoning",
     "poison*|envenen*|veneno|electrocut*,choque eletrico,"
     "choque electrico,descarga electrica,electric shock"},
    // A child who swallowed anything not food (pills, a coin, a battery) is an emergency.
    {intent::urgent, "poisoning",
     "child|kid|toddler|baby|son|daughter|filho|filha|filhinho|filhinha|bebe|nene|crianca|"
     "menino|menina|hijo|hija|hijito|hijita|nino|nina|bebito",
     "swallowed|engoliu|ingeriu|trago|ingirio|engulio", 4, true},
    {intent::urgent, "poisoning",
     "swallowed|drank|ate|bebeu|bebi|tomou|tomo|comeu|engoliu|engoli|ingeriu|ingeri|trago|"
     "bebio|comio|ingirio",
     "bleach,agua sanitaria,cloro|lejia|lavandina|battery|bateria|pilha|pila|detergent*,"
     "soda caustica,chemical*,produto de limpeza,producto de limpieza,raticida,rat poison,"
     "chumbinho|querosene|gasolina|gasoline|antifreeze|magnet*",
     4, true},
    {intent::urgent, "worst headache", "worst|pior|peor",
     "headache,dor de cabeca,dolor de cabeza,pain|dor|dolor", 4, true},
    {intent::urgent, "head injury",
     "hit|bumped|banged my|his|her|their head,hit|bumped|banged head,bateu|bati a cabeca,"
     "bateu|bati com a cabeca,golpe en la cabeza,se|me golpeo|golpee|pego la cabeza,"
     "head injury,traumatismo cran*,caiu de cabeca",
     "vomit*|confus*|sleepy|drowsy|sonolen*|somnolien*|desmai*|desmay*|bleed*|sangra*|seizure*|"
     "convuls*|dizz*|tont*|mare*|unconscious|inconscien*,throw* up,threw up,puking|puke*",
     8},
    {intent::urgent, "labour or pregnancy",
     "water broke,waters broke,water has broken,bolsa estourou,bolsa rompeu,bolsa rompida,"
     "rompi la fuente,rompio la fuente,romper la fuente,rompi aguas"},
    {intent::urgent, "labour or pregnancy", "rompi|rompio|rompe|romper|roto|rota|estourou|rompeu",
     "fuente|bolsa|aguas", 3, true},
    {intent::urgent, "labour or pregnancy", "baby|bebe|nene",
     "not moving,isnt moving,stopped moving,nao mexe,nao esta mexendo,parou de mexer,"
     "no se mueve,dejo de moverse",
     3},
    {intent::urgent, "emergency",
     "is an emergency,its an emergency,this is an emergency,medical emergency,"
     "e uma emergencia,e emergencia,es una emergencia,es una urgencia,emergencia medica,"
     "urgencia medica,socorro,call 911|112|999,llamar al 911|112,ligar pro|para|pra o|a 192,"
     "ligar 192"},
    {intent::urgent, "emergency",
     "call|need|send|chamar|chama|chamem|preciso|precisamos|manda|mandem|llamar|llamen|"
     "necesito|necesitamos|envien|manden",
     "ambulanc*|samu|paramedic*|paramedico*", 3, true},

    // ---- clinical ----
    {intent::clinical, "diagnosis", "diagnos*|diagnost*", nullptr, 0, false,
     "imagem|imagen|imaging|image|images|imagens|imagenes"},
    {intent::clinical, "diagnosis",
     "what do i have,o que eu tenho,what could it be,what could this be,could it be,"
     "o que pode ser,o q pode ser,que puede ser,que sera,is it serious,is this serious,"
     "is that serious,something serious,algo grave,e grave,es grave,sera grave,"
     "should i worry,should i be worried,do i need to worry,devo me preocupar,debo preocuparme,"
     "tengo que preocupar*,me tengo que preocupar,is it normal,is this normal,is that normal,"
     "e normal,es normal,isso e normal,eso es normal"},
    {intent::clinical, "diagnosis",
     "am i,do i have,could i have,sou,serei,soy,tenho,tengo,estou com,estoy con",
     "diabet*|cancer|tumor*|anemi*|hipertens*|hypertens*|infec*|covid|dengue|zika|chikungunya|"
     "pneumon*|neumon*|depress*|hiv|aids|sifilis|syphilis|std|ist|ets|hepatit*|gastrit*|"
     "sinusit*|apendicit*|appendicit*|disease*|doenca*|enfermedad*|illness|sickness",
     3, true},
    {intent::clinical, "diagnosis",
     "what disease,which disease,what illness,que doenca,qual doenca,que enfermedad,"
     "cual enfermedad,what condition do i have,what is wrong with me,o que eu tenho,"
     "que tengo,que me pasa"},
    {intent::clinical, "diagnosis",
     "tested positive,came back positive,positive for,deu positivo,positivo para,positivo pra,"
     "dio positivo,salio positivo,resultado positivo,result was positive,infected,infeccionou,"
     "infeccionado,infeccionada,infectou,se infecto,infectado,infectada"},
    {intent::clinical, "triage",
     "should i go to the er|hospital|emergency,do i need to see a doctor,should i see a doctor,"
     "devo ir ao hospital|pronto,devo ir pro hospital|pronto,debo ir a urgencias,"
     "debo ir al hospital|medico,tengo que ir a urgencias,tengo que ir al hospital"},
    {intent::clinical, "activity while ill",
     "exercise|exercis*|workout|gym|run|running|jog*|swim*|train|training|sport*|academia|"
     "malhar|treinar|correr|nadar|ejercicio|entrenar|gimnasio|deporte|work|trabalhar|trabajar|"
     "travel*|viajar|fly|flying|voar|volar|aviao|avion|plane|school|escola|escuela|colegio|"
     "shower|bathe|banho|ducha|duchar*|banar*|sex|sexo|drive|driving|dirigir|conducir|manejar",
     "cold|flu|sick|ill|fever|gripad*|gripe|resfriad*|resfrio|doente|febre|enfermo*|enferma*|"
     "fiebre|covid|infection|infec*|sinus*|sinusit*|injur*|lesion*|lesao|machucad*|sprain*|"
     "torcid*|pain|dor|dolor|pregnan*|gravida|embarazada|surgery|cirurgia|cirugia|operation|"
     "operacao|operacion|stitches|pontos|puntos|antibiotic*|antibiotico*|conjunctivit*|"
     "conjuntivit*|diarr*|dengue|asthma|asma",
     5},
    {intent::clinical, "symptoms of a child", "fever|febre|fiebre",
     "baby|bebe|nene|child|kid|son|daughter|filho|filha|hijo|hija|crianca|nino|nina", 4},
    {intent::clinical, "dosage", "dose*|dosag*|dosis|posolog*|dosific*", nullptr, 0, false,
     "vaccin*|vacina*|vacuna*"},
    {intent::clinical, "dosage",
     "how much,how many,quanto|quantos|quanta|quantas|cuanto|cuantos|cuanta|cuantas",
     "mg|ml|milligram*|miligram*|pill|pills|tablet*|capsul*|comprimido*|gota*|drops|pastilla*|"
     "tableta*|take|tomar|tomo|dar|dou|doy,give him,give her",
     6, true, "time|tempo|tiempo|cost*|custa|cuesta|price|preco|precio|pay|pagar|pago|long"},
    {intent::clinical, "medication", medicines,
     "take|taking|took|takes|tomar|tomo|tomei|tomando|tome|toma|tomou|tomas|give|giving|dar|"
     "dou|doy|stop*|parar|parei|paro|dejar|deje|dejo|suspend*|change*|trocar|troco|troquei|"
     "cambiar|cambio|switch*|increase*|aumentar|reduce*|reduzir|reducir|diminuir|disminuir|"
     "lower|baixar|bajar|double|dobrar|duplicar|doblar|skip*|pular|saltar|missed|miss|forgot|"
     "forget|esqueci|olvide|olvido|mix*|misturar|mezclar|combin*|together|junto|junta|juntos|"
     "juntas|safe|seguro|segura,side effect*,interac*|drink|drinking|beber|bebendo|bebiendo|"
     "alcohol|alcool|cerveja|cerveza|wine|vinho|vino|pregnan*|gravida|embarazada|breastfeed*|"
     "amamenta*|lactancia|dose*|dosis|mg|need|preciso|necesito|start*|comecei|comecar|empece|"
     "empezar|quit|should|devo|debo|deveria|deberia|posso|puedo|pode|puede,can i,while on|"
     "enquanto|mientras",
     5},
    {intent::clinical, "medication",
     "side effect*,efeito colateral,efeitos colaterais,efecto secundario,efectos secundarios,"
     "reacao adversa,reaccion adversa,adverse reaction"},
    {intent::clinical, "interpreting results",
     "result*|resultado*|exam*|exame*|examen*|test|tests|teste*|analise*|analisis,blood work,"
     "bloodwork|lab*|laudo*|informe|report|hemograma|colesterol|cholesterol|glucose|glicose|"
     "glucosa|glicemia|glucemia|level*|nivel*|niveis|valor*|value*|taxa*|ldl|hdl|tsh|t4|psa|"
     "ferritin*|triglicer*|triglycer*|creatinin*|hemoglobin*|leucocit*|leukocyt*|plaquet*|"
     "platelet*|vitamin*|biopsia|biopsy|ecg|ekg|electrocardio*|eletrocardio*|ultrassom|"
     "ultrasound|ecografia,raio x,x ray,rayos x,xray|radiograf*|tomograf*|mamograf*|mammogra*|"
     "ressonancia|resonancia|mri|scan|urina|orina|urine|pressao|presion,blood pressure,"
     "heart rate,frequencia cardiaca,frecuencia cardiaca,pulse|pulso|saturacao|saturacion|"
     "oxygen|oxigenio|oxigeno|imc|bmi|peso|weight|a1c|hba1c,acido urico,uric acid,inr|pcr|"
     "transaminas*|tgo|tgp|bilirrubin*|sodio|potasio|potassio|sodium|potassium|calcium|calcio|"
     "iron|ferro|hierro,blood sugar,sugar|acucar|azucar,white blood cell*,red blood cell*,"
     "cells|celulas|globulos",
     "mean|means|meaning|significa*|significado,quer dizer,quiere decir,normal|abnormal|anormal|"
     "high|higher|low|lower|elevated|interpret*|alto|alta|altos|altas|baixo|baixa|baixos|"
     "baixas|bajo|baja|bajos|bajas|elevad*|alterad*|preocup*|worr*|concern*|bad|ruim|ruins|"
     "malo|mala|malos|malas|positiv*|negativ*|worse|pior|peor|dangerous|perigos*|peligros*|"
     "grave|serious,reference range,valor de referencia,above|below|acima|abaixo|arriba|debajo,"
     "what should i do,what do i do,o que eu faco,o que faco,o que devo fazer,que hago,"
     "que debo hacer,what now,e agora,y ahora",
     6, false, "eu baixo,onde baixo,como baixo,baixar,download*"}, // "baixo" is also "I download"
    {intent::clinical, "interpreting results",
     "high|low|elevated|alto|alta|altos|altas|baixo|baixa|baixos|baixas|bajo|baja|bajos|bajas|"
     "elevad*|alterad*",
     "mean|means|meaning|significa*|significado,quer dizer,quiere decir,bad|ruim|malo|mala|"
     "normal|worr*|preocup*|grave|serious|dangerous|perigos*|peligros*",
     7},
    {intent::clinical, "interpreting results",
     "explain|explicar|explica|interpret*|understand|entender|entendi|entendo|entiendo",
     "my result*,the result*,o resultado,os resultados,meu resultado,meus resultados,"
     "el resultado,los resultados,mi resultado,mis resultados,my test*,my exam*,meu exame,"
     "mi examen,my report,meu laudo,o laudo,el informe,mi informe",
     3, true},
    {intent::clinical, "interpreting symptoms", symptoms,
     "normal|should,o que faco,o que eu faco,o que fazer,que hago,que hacer,que debo hacer,"
     "what do i do,what should,what can i do,what to do,what can i take,devo|debo|deveria|"
     "deberia|worried|worry|worrying|preocupad*|preocupa*|serious|grave|why,por que,"
     "mean|means|significa*|treat*|tratar|trato|tratamiento|tratamento|cure|curar|remedy|"
     "remedio*|medicine|medicament*|medication*|take|tomar|tomo|pomada|cream|creme|crema|"
     "ointment|ice|heat|gelo|hielo|calor|compressa|compresa|advice|conselho|consejo|"
     "recommend*|recomend*,could it be,pode ser,puede ser,is it,is this,is that,sera,"
     "how long,quanto tempo,cuanto tiempo,go away,passar|pasar|improve|melhorar|mejorar|"
     "better|melhor|mejor,put on,passo,me pongo,ponerme,e agora,y ahora,and now,"
     "bandage|curativo|curita|gasa|gaze|stitches|pontos|puntos|dressing|antibiotic*|"
     "antibiotico*|remove|tirar|quitar|quitarme|retirar",
     8, false, service_question},
    {intent::clinical, "interpreting symptoms",
     "knee|knees|joelho*|rodilla*|arm|arms|braco*|brazo*|leg|legs|perna*|pierna*|back|costas|"
     "espalda|head|cabeca|cabeza|stomach|belly|tummy|abdomen|barriga|estomago|panza|foot|feet|"
     "pe|pes|pie|pies|hand|hands|mao|maos|mano|manos|eye|eyes|olho*|ojo*|ear|ears|ouvido*|"
     "orelha*|oido*|oreja*|throat|garganta|neck|pescoco|cuello|tooth|teeth|dente*|diente*|"
     "muela*|skin|pele|piel|ankle*|tornozelo*|tobillo*|shoulder*|ombro*|hombro*|wrist*|finger*|"
     "dedo*|toe|toes|hip|quadril|cadera|face|rosto|lip|lips|labio*|gum|gums|gengiva*|encia*|"
     "breast*|seio*|kidney*|rim|rins|rinon*|bladder|bexiga|vejiga|penis|vagina|testicle*|"
     "testiculo*|ovary|ovario*|nose|nariz|mouth|boca|tongue|lingua|lengua|joint*|articula*|"
     "muscle*|musculo*|bone*|osso*|hueso*|wound|ferida|herida|cut|corte|incision|incisao|"
     "cicatriz|scar|stitches|pontos|puntos",
     "swollen|swelling|swell*|inchad*|inchou|inchaco|inchand*|hinch*|pain|pains|painful|hurt|"
     "hurts|hurting|ache|aches|aching|sore|dor|dores|doendo|doi|doe|dolor|dolores|duele|duelen|"
     "itch*|coca|cocando|coceira|pica|picazon|comezon|rash|mancha*|red|vermelh*|roj*|numb|numbness|"
     "dormen*|dormid*|formig*|hormig*|tingl*|bleed*|sangra*|lump*|caroco*|bulto*|nodulo*|burn*|"
     "ardor|arde|ardendo|queima*|infect*|infec*|bruise*|roxo|roxa|hematoma|moreton*|stiff|"
     "rigid*|cracked|torci*|twisted|sprain*|broken|quebr*|fractur*|fratur*|deslocad*|"
     "dislocat*|pus|sarpullido|hot|warm|quente|caliente",
     3, false, service_question},
    {intent::clinical, "interpreting symptoms",
     "i have,i ve had,ive had,im having,i m having,been having,has had,has a,estou com,to com,"
     "tou com,ta com,esta com,estou tendo,tenho,tengo,tiene,estoy con,esta con,me duele,me dio,"
     "sinto,siento,feel,feeling,sentindo,sintiendo,llevo",
     symptoms, 3, true},
};

const std::vector<rule>& all_rules() {
  static const std::vector<rule> rules = [] {
    std::vector<rule> out;
    for (const rule_spec& s : specs)
      out.push_back(rule{s.kind, s.name, parse_list(s.any), parse_list(s.with),
                         parse_list(s.unless), s.window, s.ordered});
    return out;
  }();
  return rules;
}

std::optional<classification> classify_by_rules(std::string_view message) {
  const std::vector<std::string> tokens = rule_tokens(message);
  for (const rule& r : all_rules())
    if (rule_fires(r, tokens))
      return classification{r.kind, 1.0,
                            std::string(intent_name(r.kind)) + ": " + std::string(r.name)};
  return std::nullopt;
}

// ---- the model ------------------------------------------------------------------------------

const double* model_weights(std::string_view term) {
  const std::string_view* begin = model::vocabulary;
  const std::string_view* end = model::vocabulary + model::vocabulary_size;
  const std::string_view* it = std::lower_bound(begin, end, term);
  if (it == end || *it != term) return nullptr;
  return model::log_likelihood + static_cast<std::size_t>(it - begin) * model::class_count;
}

intent model_class(std::size_t index) {
  return intent_from(model::class_names[index]).value_or(intent::other);
}

// ---- phrases and greetings ------------------------------------------------------------------

constexpr std::array<std::string_view, 3> dont_know = {
    "I don't know; a person from our team will answer you soon.",
    "N\u00E3o sei; uma pessoa da nossa equipe vai responder voc\u00EA em breve.",
    "No lo s\u00E9; una persona de nuestro equipo le responder\u00E1 pronto."};
constexpr std::array<std::string_view, 3> handoff = {
    "A person from our team will answer you shortly.",
    "Uma pessoa da nossa equipe vai responder voc\u00EA em instantes.",
    "Una persona de nuestro equipo le responder\u00E1 en breve."};
constexpr std::array<std::string_view, 3> greeting = {
    "Hello! How can I help you?", "Ol\u00E1! Como posso ajudar?",
    "\u00A1Hola! \u00BFEn qu\u00E9 puedo ayudarle?"};
constexpr std::array<std::string_view, 3> emergency = {
    "If this is an emergency, call your local emergency number (such as 911 or 112) or go to "
    "the nearest emergency room now.",
    "Se for uma emerg\u00EAncia, ligue agora para o servi\u00E7o de emerg\u00EAncia (192 no "
    "Brasil, 112 em Portugal) ou v\u00E1 ao pronto-socorro mais pr\u00F3ximo.",
    "Si es una emergencia, llame ahora al n\u00FAmero de emergencias (112 o 911) o acuda al "
    "servicio de urgencias m\u00E1s cercano."};

// A message made only of greetings, thanks and small words: answered with a greeting.
bool is_bare_greeting(std::string_view message) {
  static const std::unordered_set<std::string_view> core = {
      "hi",        "hello",   "hey",     "heya",    "hiya",    "howdy", "greetings", "morning",
      "afternoon", "evening", "thanks",  "thank",   "thx",     "ty",    "cheers",    "bye",
      "goodbye",   "oi",      "ola",     "opa",     "bom",     "boa",   "obrigado",  "obrigada",
      "obg",       "brigado", "brigada", "valeu",   "vlw",     "tchau", "agradeco",  "hola",
      "buenos",    "buenas",  "buen",    "saludos", "gracias", "chao",  "chau",      "adios"};
  static const std::unordered_set<std::string_view> filler = {
      "good",   "night",   "day",    "there",   "everyone", "all",    "ok",       "okay",
      "great",  "perfect", "nice",   "lot",     "again",    "anyone", "doing",    "help",
      "doctor", "doc",     "dr",     "dra",     "team",     "folks",  "guys",     "one",
      "dia",    "tarde",   "noite",  "tudo",    "bem",      "bom",    "blz",      "beleza",
      "show",   "logo",    "doutor", "doutora", "pessoal",  "gente",  "perfeito", "certo",
      "tenha",  "atencao", "ajuda",  "ai",      "dias",     "tardes", "noches",   "tal",
      "mil",    "muchas",  "amable", "hasta",   "luego",    "vale",   "perfecto", "doctora",
      "todos",  "estan",   "tenga",  "much",    "so",       "have",   "a",        "you"};
  const std::string folded = fold(message);
  bool any_core = false;
  bool any_word = false;
  for (std::string_view w : split(folded, ' ')) {
    any_word = true;
    // Stretched words ("oiii", "holaa", "bom diaa") count as the word.
    std::string_view base = w;
    while (base.size() > 2 && base[base.size() - 1] == base[base.size() - 2]) base.remove_suffix(1);
    if (core.contains(w) || core.contains(base)) {
      any_core = true;
    } else if (!filler.contains(w) && !filler.contains(base) && !terms(w).empty()) {
      return false; // neither a greeting nor a stopword: the message asks for something
    }
  }
  return any_word && any_core;
}

bool contains_words(const std::vector<std::string_view>& message, std::string_view keyword) {
  const std::string folded = fold(keyword);
  const std::vector<std::string_view> kw = split(folded, ' ');
  if (kw.empty() || kw.size() > message.size()) return false;
  for (std::size_t i = 0; i + kw.size() <= message.size(); ++i)
    if (std::equal(kw.begin(), kw.end(), message.begin() + static_cast<std::ptrdiff_t>(i)))
      return true;
  return false;
}

std::size_t index_of(language l) {
  return static_cast<std::size_t>(l);
}

} // namespace

// ---- public ---------------------------------------------------------------------------------

const char* intent_name(intent i) {
  switch (i) {
  case intent::greeting: return "greeting";
  case intent::faq: return "faq";
  case intent::booking: return "booking";
  case intent::billing: return "billing";
  case intent::results: return "results";
  case intent::complaint: return "complaint";
  case intent::clinical: return "clinical";
  case intent::urgent: return "urgent";
  case intent::other: return "other";
  }
  return "other";
}

std::optional<intent> intent_from(std::string_view name) {
  for (intent i : {intent::greeting, intent::faq, intent::booking, intent::billing, intent::results,
                   intent::complaint, intent::clinical, intent::urgent, intent::other})
    if (name == intent_name(i)) return i;
  return std::nullopt;
}

classification classify(std::string_view message) {
  if (auto by_rule = classify_by_rules(message)) return *by_rule;
  return classify_model(message);
}

classification classify_model(std::string_view message) {
  const std::vector<std::string> ts = terms(message);
  const model::best_class best =
      model::score_terms(ts, model::class_count, model::log_prior, model_weights);
  if (best.known_terms == 0) return classification{intent::other, 0, {}}; // nothing it has seen
  return classification{model_class(best.index), best.posterior, {}};
}

std::string_view phrase_dont_know(language l) {
  return dont_know[index_of(l)];
}
std::string_view phrase_handoff(language l) {
  return handoff[index_of(l)];
}
std::string_view phrase_greeting(language l) {
  return greeting[index_of(l)];
}
std::string_view phrase_emergency(language l) {
  return emergency[index_of(l)];
}

const char* handoff_reason_name(handoff_reason r) {
  switch (r) {
  case handoff_reason::none: return "none";
  case handoff_reason::urgent: return "urgent";
  case handoff_reason::clinical: return "clinical";
  case handoff_reason::keyword: return "keyword";
  case handoff_reason::complaint: return "complaint";
  case handoff_reason::no_answer: return "no_answer";
  case handoff_reason::provider_error: return "provider_error";
  }
  return "none";
}

verdict screen(std::string_view message, const agent_rules& rules) {
  verdict v;
  v.lang = rules.reply_language.value_or(detect_language(message));
  if (auto by_rule = classify_by_rules(message)) {
    v.intent = std::move(*by_rule);
    v.handoff = v.intent.kind == intent::urgent ? handoff_reason::urgent : handoff_reason::clinical;
    return v;
  }
  v.intent = classify_model(message);
  const std::string folded = fold(message);
  const std::vector<std::string_view> words = split(folded, ' ');
  for (const std::string& k : rules.handoff_keywords) {
    if (contains_words(words, k)) {
      v.handoff = handoff_reason::keyword;
      v.keyword = k;
      return v;
    }
  }
  switch (v.intent.kind) {
  case intent::urgent: v.handoff = handoff_reason::urgent; break;
  case intent::clinical: v.handoff = handoff_reason::clinical; break;
  case intent::complaint: v.handoff = handoff_reason::complaint; break;
  default: break;
  }
  return v;
}

builtin_answer answer_builtin(const knowledge_index& index,
                              const std::function<const std::string*(std::int64_t)>& passage_text,
                              std::string_view message, const agent_rules& rules) {
  builtin_answer out;
  const verdict v = screen(message, rules);
  out.lang = v.lang;
  out.kind = v.intent.kind;
  out.handoff = v.handoff;
  if (v.handoff != handoff_reason::none) {
    // The emergency text goes first when a rule found the emergency, or the model is sure of
    // it; a hesitant model still hands the conversation to a person, without the alarm.
    const bool sure = !v.intent.rule.empty() || v.intent.confidence >= 0.5;
    if (v.handoff == handoff_reason::urgent && sure) {
      const bool custom = rules.emergency_message && !rules.emergency_message->empty();
      out.answer = custom ? *rules.emergency_message : std::string(phrase_emergency(v.lang));
      out.answer += "\n\n";
    }
    out.answer += phrase_handoff(v.lang);
    return out;
  }
  if (is_bare_greeting(message)) {
    out.kind = intent::greeting;
    out.answer = phrase_greeting(v.lang);
    return out;
  }

  // One spare hit in case a passage vanished between the search and the read.
  const std::vector<knowledge_index::hit> hits = index.search(message, max_answer_passages + 1);
  double best_score = 0;
  for (const knowledge_index::hit& h : hits) {
    if (h.score < rules.min_score || h.coverage < rules.min_coverage) continue;
    if (!out.passages.empty() && h.score < next_passage_share * best_score) break;
    const std::string* text = passage_text(h.passage_id);
    if (text == nullptr) continue;
    if (out.passages.empty()) {
      best_score = h.score;
    } else {
      out.answer += "\n\n";
    }
    out.answer += *text;
    out.passages.push_back(h.passage_id);
    if (out.passages.size() == max_answer_passages) break;
  }
  if (!out.passages.empty()) {
    if (out.kind == intent::greeting) out.kind = intent::faq; // a greeting with a question
    return out;
  }
  if (v.intent.kind == intent::greeting) {
    out.answer = phrase_greeting(v.lang);
    return out;
  }
  out.answer = phrase_dont_know(v.lang);
  out.handoff = handoff_reason::no_answer;
  return out;
}

} // namespace crm::domain::ai
